package sim_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// stuckCluster is the simulated cluster where creating a Job for one slot
// blocks until the test ends (block) or fails (otherwise): an apiserver
// that is slow or refuses for that slot alone.
type stuckCluster struct {
	*kube.Cluster
	slot      string
	block     bool
	recovered atomic.Bool
	calls     atomic.Int32
}

func (c *stuckCluster) CreateJob(ctx context.Context, req handlers.JobRequest) (bool, error) {
	if req.Slot != c.slot || c.recovered.Load() {
		return c.Cluster.CreateJob(ctx, req)
	}
	c.calls.Add(1)
	if c.block {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return false, errors.New("apiserver: the server is currently unable to handle the request")
}

// runQueued runs reactors over the cluster on the work queue (Run) until
// the test ends.
func runQueued(t *testing.T, h *handlerstest.Harness, w *sim.World, cl handlers.Cluster) *handlers.Reactors {
	t.Helper()
	return runReactors(t, handlers.ReactorsConfig{Views: h.Views, Service: h.Service, Cluster: cl, Clock: h.Clock, Namespace: "claimstream", Log: quiet})
}

// runReactors runs reactors of cfg on the work queue until the test ends.
func runReactors(t *testing.T, cfg handlers.ReactorsConfig) *handlers.Reactors {
	t.Helper()
	r := handlers.NewReactors(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reactors: %v", err)
		}
	})
	return r
}

// waitIdle waits until the reactors' work queue is idle: nothing queued,
// no worker inside an item, and the queue's delayed adds (timers,
// backoffs) waiting for the clock. Only the fake clock or a new event
// makes work then, so what the test counts next is what it caused.
func waitIdle(t *testing.T, r *handlers.Reactors, what string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	eventstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if n := r.QueueDepth(); n > 0 {
			return fmt.Errorf("%s: %d work items queued", what, n)
		}
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "handlers.(*Reactors).workOne(") {
				return fmt.Errorf("%s: a worker is inside an item", what)
			}
			if strings.Contains(g, ").waitingLoop(") && !strings.HasPrefix(g[strings.Index(g, "[")+1:], "select") {
				return fmt.Errorf("%s: the queue is moving its due delayed adds", what)
			}
		}
		return nil
	})
}

// startupJobOf says whether the fake clientset has the startup Job of a
// slot.
func startupJobOf(t *testing.T, w *sim.World, slot string) bool {
	t.Helper()
	jobs, err := w.Fake.BatchV1().Jobs("claimstream").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if handlers.SlotOfJob(j.Labels, j.Annotations) == slot && j.Labels[handlers.LabelOperation] == decide.OperationStartup {
			return true
		}
	}
	return false
}

// waitStartupJob waits (bounded, wall time) for the startup Job of a slot;
// why says what holds it when it does not come.
func waitStartupJob(t *testing.T, w *sim.World, slot, why string) {
	t.Helper()
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !startupJobOf(t, w, slot) {
			return fmt.Errorf("slot %s has no startup Job: %s", slot, why)
		}
		return nil
	})
}

// TestQueueSlowSlotDoesNotDelayOthers: slot a's Job create hangs (or
// fails); slot b, claimed in the same call, still gets its startup Job.
// Nothing advances the fake clock: the events alone drive the reactors.
func TestQueueSlowSlotDoesNotDelayOthers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block bool
	}{{"blocks", true}, {"fails", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h, w := newWorld(t, sim.Timing{})
			declare(t, h, "g", events.GroupSpec{ClaimTTL: events.Duration(10 * time.Minute)}, "a", "b")
			stuck := &stuckCluster{Cluster: w.Cluster, slot: "a", block: tc.block}
			runQueued(t, h, w, stuck)
			h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "test"})
			waitStartupJob(t, w, "b", "slot a's create "+tc.name)
			// Slot a's item runs on its own worker and may reach its
			// create after b's Job exists.
			eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
				if stuck.calls.Load() == 0 {
					return errors.New("slot a's Job create was never tried")
				}
				return nil
			})
			if startupJobOf(t, w, "a") {
				t.Fatal("slot a got a Job through a cluster that refuses it")
			}
		})
	}
}

// TestQueueFailingSlotBacksOffAlone: a slot whose create fails is retried
// after a backoff on the injected clock, without waiting for the periodic
// resync, and then gets its Job once the cluster accepts it.
func TestQueueFailingSlotBacksOffAlone(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{ClaimTTL: events.Duration(10 * time.Minute)}, "a")
	stuck := &stuckCluster{Cluster: w.Cluster, slot: "a"}
	r := runQueued(t, h, w, stuck)
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"})
	// The failures end in a backoff the fake clock holds: the item waits
	// among the queue's delayed adds.
	waitIdle(t, r, "slot a's failed creates backing off")
	held := stuck.calls.Load()
	t.Logf("%d failed creates before the backoff held", held)
	if held == 0 {
		t.Fatal("slot a's Job create was never tried")
	}
	stuck.recovered.Store(true)
	// Past its backoff, well within the periodic resync (15s) and the
	// old global retry (5s).
	h.Clock.Step(2 * time.Second)
	waitStartupJob(t, w, "a", fmt.Sprintf("not retried after its backoff (%d tries)", held))
}

// workCounter counts the slot and scaler work items the queue ran.
type workCounter struct{ slots, scalers atomic.Int32 }

func (c *workCounter) WorkDone(work string, _ time.Duration, _ bool) {
	switch work {
	case "slot":
		c.slots.Add(1)
	case "scaler":
		c.scalers.Add(1)
	}
}
func (c *workCounter) Reacted(time.Duration)   {}
func (c *workCounter) ObserveDepth(func() int) {}

// atLeast waits (bounded) until the counter reaches n.
func atLeast(t *testing.T, c *atomic.Int32, n int32, what string) {
	t.Helper()
	eventstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if got := c.Load(); got < n {
			return fmt.Errorf("%s: %d, want at least %d", what, got, n)
		}
		return nil
	})
}

// TestQueueResyncIsSpread: the periodic full resync enqueues every slot
// again, spread over the period on the injected clock rather than all at
// once ahead of an event's slot.
func TestQueueResyncIsSpread(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, handlerstest.Slots("n", 100)...)
	count := &workCounter{}
	r := runReactors(t, handlers.ReactorsConfig{Views: h.Views, Service: h.Service, Cluster: w.Cluster, Clock: h.Clock, Namespace: "claimstream", Log: quiet, Metrics: count})

	atLeast(t, &count.slots, 100, "slots the start ran")
	waitIdle(t, r, "after the start")
	start := count.slots.Load()
	// The resync runs every group's scaler at once: once it has, and the
	// queue is idle again, the slots it ran at once are counted.
	scalers := count.scalers.Load()
	h.Clock.Step(projections.ReconcilePeriod)
	atLeast(t, &count.scalers, scalers+1, "scaler items after the resync")
	waitIdle(t, r, "after the resync")
	if n := count.slots.Load() - start; n > 5 {
		t.Fatalf("the resync ran %d of 100 slots at once", n)
	}
	h.Clock.Step(projections.ReconcilePeriod / 2)
	atLeast(t, &count.slots, start+40, "slots run half a period into the resync")
	waitIdle(t, r, "half a period into the resync")
	if n := count.slots.Load() - start; n > 60 {
		t.Fatalf("half a period into the resync %d of 100 slots ran, want about half", n)
	}
}
