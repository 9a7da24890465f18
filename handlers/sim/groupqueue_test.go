package sim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// TestScalerStuckGroupDoesNotDelayOthers: two builtin groups, "a" and "b"
// (a sorts first). Group a's decisions are stuck: a command on a holds the
// group's lock (its append does not return), so a's scale decision cannot
// be made. Work arrives; group b still decides to provision, on its own
// work item. With one scaler item for every group, the pass waited on a
// and b never decided.
func TestScalerStuckGroupDoesNotDelayOthers(t *testing.T) {
	h := handlerstest.New(t)
	// The hook holds the append of the test's command on group a (its ctx
	// carries the marker): the command keeps group a's lock until the test
	// ends. Appends of the reactors go on.
	type stuckKey struct{}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.Service.OnAppend = func(ctx context.Context, _ time.Duration, _ int, _ error) {
		if ctx.Value(stuckKey{}) != nil {
			once.Do(func() { close(held) })
			<-release
		}
	}
	w := startWorld(t, h, sim.Timing{PodsPerNode: 1})
	// One slot in a: while a's lock is held, the items that may wait on it
	// (scaler/a, strays/a, a-1) take three of the four workers at most.
	declare(t, h, "a", builtinSpec(1, 1), "a-1")
	declare(t, h, "b", builtinSpec(1, 1), "b-1")
	runQueued(t, h, w, w.Cluster)
	t.Cleanup(func() { close(release) }) // before runQueued's cleanup waits for the workers

	go func() {
		ctx := context.WithValue(context.Background(), stuckKey{}, true)
		_, _ = h.Service.Execute(ctx, decide.IncreaseSize{Group: "a", Delta: 1, RequestedBy: "test"})
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the command on group a never appended")
	}

	ctx := context.Background()
	if err := w.Sim.RunPod(ctx, sim.PodSpec{Namespace: "work", Name: "job", RunsFor: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// The periodic resync asks every group's scaler again; step it until b
	// decides (its observation may miss the pod at first).
	eventstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if got := actions(decisions(t, h, "b")); len(got) > 0 {
			if got[0] != "Provision" {
				t.Fatalf("group b decided %v, want Provision", got)
			}
			return nil
		}
		h.Clock.Step(projections.ReconcilePeriod)
		return errors.New("group b made no decision while group a's decision was stuck")
	})
	if got := decisions(t, h, "a"); len(got) != 0 {
		t.Fatalf("group a decided %v while its lock was held", actions(got))
	}
}
