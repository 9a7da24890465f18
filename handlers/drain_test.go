package handlers_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// TestDrainEnforcesTheRecordedPolicy: a drain started under force (1m) is
// enforced as recorded on DrainStarted, though the group changes to wait
// with a longer timeout while it runs: past the recorded minute the
// remaining pod is deleted and the shutdown follows.
func TestDrainEnforcesTheRecordedPolicy(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{DrainTimeout: events.Duration(time.Minute), OnDrainTimeout: events.DrainForce}, false, "a")
	e.bootToReady("g", "a")
	e.runPod("web", "web-0", "a")
	e.blockEvictions("web")
	e.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	e.passes()
	if c := e.claim("a"); c.Drain == nil || c.Drain.Policy != events.DrainForce || c.Drain.Timeout.D() != time.Minute {
		t.Fatalf("drain %+v, want force after 1m", c.Drain)
	}
	// The group changes while the drain runs.
	var seq uint64
	var changed events.GroupSpec
	e.h.Read(func(s *projections.State) { seq, changed = s.Groups["g"].Seq, s.Groups["g"].Spec })
	changed.DrainTimeout, changed.OnDrainTimeout = events.Duration(time.Hour), events.DrainWait
	res, err := e.h.Store.Append(context.Background(), events.GroupAggregate("g"), seq, events.Event{Time: e.h.Clock.Now(), Data: events.GroupChanged{Ref: events.Ref{Group: "g", Cause: "pool file changed"}, Spec: changed}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.h.Views.WaitFor(ctx, res.Last); err != nil {
		t.Fatal(err)
	}
	e.step(time.Minute + time.Second)
	e.passes()
	c := e.claim("a")
	if c.Drain.TimedOutAt == nil {
		t.Fatalf("the drain did not time out at its recorded minute: %+v", c.Drain)
	}
	if n := len(e.acts.of("deletePod")); n != 1 {
		t.Fatalf("%d pod deletes past the recorded force timeout, want 1", n)
	}
	if c.LastShutdownJob == "" {
		t.Fatal("no shutdown after the forced drain")
	}
}
