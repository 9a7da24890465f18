package sim_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// BenchmarkReaction measures event to reaction: the wall time from a
// ClaimCreated in the log to its startup Job created in the simulator's
// cluster (client-go's fake clientset), while claims keep arriving, for
// pools of 10, 1,000 and 10,000 slots. "sweep" is the loop the reactors
// ran before the work queue (one ReconcileAll over every slot after each
// change, kept here to compare in the same run); "queue" is Reactors.Run.
// api=20ms adds 20ms to every Job create (a busy apiserver). The fake
// clock stands still: only events and cache changes drive them.
//
//	go test ./handlers/sim/ -run '^$' -bench BenchmarkReaction -benchtime 1x -v
func BenchmarkReaction(b *testing.B) {
	for _, api := range []time.Duration{0, 20 * time.Millisecond} {
		for _, slots := range []int{10, 1000, 10000} {
			for _, loop := range []string{"sweep", "queue"} {
				b.Run(fmt.Sprintf("api=%s/slots=%d/loop=%s", api, slots, loop), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						p50, p99, n := measureReaction(b, slots, loop, api)
						b.ReportMetric(p50.Seconds()*1000, "p50-ms")
						b.ReportMetric(p99.Seconds()*1000, "p99-ms")
						b.Logf("api=%s slots=%d loop=%s claims=%d p50=%s p99=%s", api, slots, loop, n, p50, p99)
					}
				})
			}
		}
	}
}

func measureReaction(b *testing.B, slots int, loop string, api time.Duration) (p50, p99 time.Duration, n int) {
	b.StopTimer()
	h := handlerstest.New(b)
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Log: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	names := handlerstest.Slots("n", slots)
	for from := 0; from < slots; from += 500 {
		declare(b, h, "g", events.GroupSpec{ClaimTTL: events.Duration(time.Hour)}, names[from:min(from+500, slots)]...)
	}

	var mu sync.Mutex
	created := map[string]time.Time{} // claim -> its startup Job's create
	w.Fake.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if j, ok := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job); ok && j.Labels[handlers.LabelOperation] == decide.OperationStartup {
			mu.Lock()
			if _, seen := created[j.Labels[handlers.LabelClaim]]; !seen {
				created[j.Labels[handlers.LabelClaim]] = time.Now()
			}
			mu.Unlock()
		}
		return false, nil, nil
	})

	var cl handlers.Cluster = w.Cluster
	if api > 0 {
		cl = &slowCluster{Cluster: w.Cluster, delay: api}
	}
	count := &workCounter{}
	r := handlers.NewReactors(handlers.ReactorsConfig{Views: h.Views, Service: h.Service, Cluster: cl, Clock: h.Clock, Namespace: "claimstream", Log: quiet, Metrics: count})
	swept := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if loop == "queue" {
			_ = r.Run(ctx)
			return
		}
		sweep(ctx, r, h.Views, cl, swept)
	}()
	defer func() { cancel(); <-done }()

	// Both loops first look at every slot once: the claims start after.
	eventstest.CheckFor(b, time.Minute, 10*time.Millisecond, func() error {
		if loop == "queue" {
			if n := count.slots.Load(); n < int32(slots) || r.QueueDepth() > 0 {
				return fmt.Errorf("the start's pass over %d slots has not finished: %d ran, %d queued", slots, n, r.QueueDepth())
			}
			return nil
		}
		select {
		case <-swept:
			return nil
		default:
			return fmt.Errorf("the first sweep over %d slots has not finished", slots)
		}
	})

	// Claims arrive one at a time, every 5ms, while the earlier ones are
	// still being reacted to. A claim's clock starts when the views fold
	// its ClaimCreated (what the reactors can first see).
	asked := map[string]time.Time{}
	unsubscribe := h.Views.Subscribe(func(e events.Event) {
		if c, ok := e.Data.(events.ClaimCreated); ok {
			mu.Lock()
			asked[c.Claim] = time.Now()
			mu.Unlock()
		}
	})
	defer unsubscribe()
	claims := min(slots, 200)
	pace := time.NewTimer(time.Hour)
	defer pace.Stop()
	b.StartTimer()
	for range claims {
		h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "bench"})
		pace.Reset(5 * time.Millisecond)
		<-pace.C
	}
	eventstest.CheckFor(b, 5*time.Minute, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if got, want := len(created), len(asked); got < claims || want < claims {
			return fmt.Errorf("%d of %d startup Jobs created (%d claims folded)", got, claims, want)
		}
		return nil
	})
	b.StopTimer()
	var lat []time.Duration
	mu.Lock()
	for c, at := range asked {
		lat = append(lat, max(created[c].Sub(at), 0))
	}
	mu.Unlock()
	slices.Sort(lat)
	return lat[len(lat)/2], lat[(len(lat)*99)/100-boolInt(len(lat)%100 == 0)], len(lat)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// slowCluster is a busy apiserver: every Job create takes delay more.
type slowCluster struct {
	*kube.Cluster
	delay time.Duration
}

func (c *slowCluster) CreateJob(ctx context.Context, req handlers.JobRequest) (bool, error) {
	t := time.NewTimer(c.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
	}
	return c.Cluster.CreateJob(ctx, req)
}

// sweep is the reactors' loop before the work queue: one ReconcileAll over
// every slot, again after every change of the views or the caches. swept
// is closed after the first.
func sweep(ctx context.Context, r *handlers.Reactors, views *projections.Runner, cl handlers.Cluster, swept chan<- struct{}) {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for first := true; ; first = false {
		viewsChanged, clusterChanged := views.Changed(), cl.Changed()
		if _, err := r.ReconcileAll(ctx); ctx.Err() != nil {
			return
		} else if err != nil {
			retry.Reset(10 * time.Millisecond)
			select {
			case <-ctx.Done():
				return
			case <-retry.C:
			}
		}
		if first {
			close(swept)
		}
		select {
		case <-ctx.Done():
			return
		case <-viewsChanged:
		case <-clusterChanged:
		}
	}
}
