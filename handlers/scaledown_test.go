package handlers_test

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

func TestScaleDownCordonsShutsDownCompletesAndDeletesTheNode(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	c := e.bootToReady("g", "a")
	e.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	e.passes()
	job := decide.JobName(c.Name, "stop", 1)
	if n, _ := e.cl.Node("a"); !n.Unschedulable || !e.jobs()[job] {
		t.Fatalf("cordoned %t, jobs %v", n.Unschedulable, e.jobs())
	}
	e.passes()
	if got := e.claim("a"); got.ShutdownAttempts != 1 {
		t.Fatalf("a pass counted a shutdown: %d", got.ShutdownAttempts)
	}
	e.finishJob(job, true, "")
	e.setReady("a", false)
	e.passes()
	got := e.claim("a")
	if got.Phase != projections.PhaseCompleted || got.Reason != projections.ReasonScaledDown {
		t.Fatalf("%s/%s", got.Phase, got.Reason)
	}
	if _, ok := e.cl.Node("a"); ok {
		t.Fatal("NotReady node of the powered-off machine not deleted")
	}
	if sl := e.slot("a"); sl.Node.Present {
		t.Fatal("node deletion not observed")
	}
}

func TestScaleDownBoundedAttemptsPauseAndRetry(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	c := e.bootToReady("g", "a")
	e.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	for n := 1; n <= 3; n++ {
		e.passes()
		job := decide.JobName(c.Name, "stop", n)
		if !e.jobs()[job] {
			t.Fatalf("shutdown %d: no Job %s (%v)", n, job, e.jobs())
		}
		e.finishJob(job, true, "") // "succeeds", the machine stays up
		e.passes()
		if len(e.jobs()) != 1+n {
			t.Fatalf("fired before the settle: %v", e.jobs())
		}
		e.step(handlers.ShutdownSettle)
	}
	e.passes()
	got := e.claim("a")
	if got.ShutdownPausedUntil == nil || !got.ShutdownPausedUntil.Equal(e.h.Clock.Now().Add(30*time.Minute)) {
		t.Fatalf("no pause: %+v", got)
	}
	e.step(30*time.Minute - time.Second)
	e.passes()
	if len(e.jobs()) != 4 {
		t.Fatalf("fired during the pause: %v", e.jobs())
	}
	e.step(time.Second)
	e.passes()
	if !e.jobs()[decide.JobName(c.Name, "stop", 4)] {
		t.Fatalf("no retry after the pause: %v", e.jobs())
	}
	if got := e.claim("a"); got.ShutdownAttempts != 1 {
		t.Fatalf("streak after the pause: %d", got.ShutdownAttempts)
	}
}
