package sim_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
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
func runQueued(t *testing.T, h *handlerstest.Harness, w *sim.World, cl handlers.Cluster) {
	t.Helper()
	r := handlers.NewReactors(handlers.ReactorsConfig{Views: h.Views, Service: h.Service, Cluster: cl, Clock: h.Clock, Namespace: "claimstream", Log: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reactors: %v", err)
		}
	})
}

// startupJobOf polls (bounded, wall time) for the startup Job of a slot in
// the fake clientset.
func startupJobOf(t *testing.T, w *sim.World, slot string, within time.Duration) bool {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		jobs, err := w.Fake.BatchV1().Jobs("claimstream").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			if handlers.SlotOfJob(j.Labels, j.Annotations) == slot && j.Labels[handlers.LabelOperation] == handlers.OperationStartup {
				return true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
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
			h.MustExec(handlers.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "test"})
			if !startupJobOf(t, w, "b", 10*time.Second) {
				t.Fatalf("slot b got no startup Job while slot a's create %s", tc.name)
			}
			// Slot a's item runs on its own worker and may reach its
			// create after b's Job exists.
			eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
				if stuck.calls.Load() == 0 {
					return errors.New("slot a's Job create was never tried")
				}
				return nil
			})
			if startupJobOf(t, w, "a", 0) {
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
	runQueued(t, h, w, stuck)
	h.MustExec(handlers.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"})
	// The failures settle into a backoff the fake clock holds.
	end := time.Now().Add(10 * time.Second)
	last := int32(-1)
	for time.Now().Before(end) {
		n := stuck.calls.Load()
		if n > 0 && n == last {
			break
		}
		last = n
		time.Sleep(200 * time.Millisecond)
	}
	held := stuck.calls.Load()
	t.Logf("%d failed creates before the backoff held", held)
	if held == 0 {
		t.Fatal("slot a's Job create was never tried")
	}
	stuck.recovered.Store(true)
	// Past its backoff, well within the periodic resync (15s) and the
	// old global retry (5s).
	h.Clock.Step(2 * time.Second)
	if !startupJobOf(t, w, "a", 10*time.Second) {
		t.Fatalf("slot a not retried after its backoff (%d tries)", held)
	}
}

// workCounter counts the slot work items the queue ran.
type workCounter struct{ slots atomic.Int32 }

func (c *workCounter) WorkDone(work string, _ time.Duration, _ bool) {
	if work == "slot" {
		c.slots.Add(1)
	}
}
func (c *workCounter) Reacted(time.Duration)   {}
func (c *workCounter) ObserveDepth(func() int) {}

// settled waits (bounded) until the count stops moving and returns it.
func settled(t *testing.T, c *workCounter) int32 {
	t.Helper()
	last := int32(-1)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		n := c.slots.Load()
		if n == last {
			return n
		}
		last = n
	}
	t.Fatal("the work queue did not settle")
	return 0
}

// TestQueueResyncIsSpread: the periodic full resync enqueues every slot
// again, spread over the period on the injected clock rather than all at
// once ahead of an event's slot.
func TestQueueResyncIsSpread(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, handlerstest.Slots("n", 100)...)
	count := &workCounter{}
	r := handlers.NewReactors(handlers.ReactorsConfig{Views: h.Views, Service: h.Service, Cluster: w.Cluster, Clock: h.Clock, Namespace: "claimstream", Log: quiet, Metrics: count})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	start := settled(t, count)
	if start < 100 {
		t.Fatalf("the start enqueued %d slots, want every one (100)", start)
	}
	h.Clock.Step(projections.ReconcilePeriod)
	if n := settled(t, count) - start; n > 5 {
		t.Fatalf("the resync ran %d of 100 slots at once", n)
	}
	h.Clock.Step(projections.ReconcilePeriod / 2)
	if n := settled(t, count) - start; n < 40 || n > 60 {
		t.Fatalf("half a period into the resync %d of 100 slots ran, want about half", n)
	}
}
