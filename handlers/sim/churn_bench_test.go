package sim_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
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
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/provider"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// Churn settings: 100 claims a second, each through its whole lifecycle
// (created, booting, ready, released, shut down, completed) on a group of
// churnSlots slots next to the measured pool, for churnWindow of wall time.
const (
	churnRate   = 100
	churnSlots  = 500
	churnWindow = 20 * time.Second
	churnGroup  = "churn"
)

// churnTiming: a lifecycle of about half a second, so 100 claims a second
// keep about 50 machines in flight.
var churnTiming = sim.Timing{JobDuration: 100 * time.Millisecond, BootDelay: 100 * time.Millisecond, ReadyDelay: 50 * time.Millisecond, TaintDelay: 50 * time.Millisecond}

// BenchmarkChurn measures, at pools of 10, 1,000 and 10,000 slots (in 100
// groups from 1,000 up) while 100 claims a second go through their whole
// lifecycle on a 500-slot group beside them: event to reaction (a
// ClaimCreated folded by the views to its startup Job created in the
// simulator's cluster), cluster-autoscaler's reads in process (TargetSize,
// NodeGroupNodes, NodeGroups, one call every 5ms), and the
// process's CPU time per completed lifecycle. The real store, views,
// command service, reactors on their work queue, kube adapter over the fake
// clientset and the simulated machines all run in this process; the
// plane's clock is a fake clock stepped with the wall clock.
//
//	go test ./handlers/sim/ -run '^$' -bench BenchmarkChurn -benchtime 1x -count 3 -timeout 30m
func BenchmarkChurn(b *testing.B) {
	for _, slots := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := runChurn(b, slots)
				b.ReportMetric(ms(r.react.p50), "react-p50-ms")
				b.ReportMetric(ms(r.react.p99), "react-p99-ms")
				b.ReportMetric(float64(r.created)/churnWindow.Seconds(), "created/s")
				b.ReportMetric(float64(r.completed)/churnWindow.Seconds(), "completed/s")
				b.ReportMetric(r.cpuPerClaim.Seconds()*1000, "cpu-ms/claim")
				b.ReportMetric(ms(r.reads["TargetSize"].p99), "TargetSize-p99-ms")
				b.ReportMetric(ms(r.reads["NodeGroupNodes"].p99), "NodeGroupNodes-p99-ms")
				b.ReportMetric(ms(r.reads["NodeGroups"].p99), "NodeGroups-p99-ms")
				b.Logf("slots=%d created=%d completed=%d react p50=%s p99=%s cpu/claim=%s reads p50/p99: TargetSize %s/%s NodeGroupNodes %s/%s NodeGroups %s/%s",
					slots, r.created, r.completed, r.react.p50, r.react.p99, r.cpuPerClaim,
					r.reads["TargetSize"].p50, r.reads["TargetSize"].p99, r.reads["NodeGroupNodes"].p50, r.reads["NodeGroupNodes"].p99,
					r.reads["NodeGroups"].p50, r.reads["NodeGroups"].p99)
			}
		})
	}
}

// silent drops the reactors' lines (the context-canceled errors of the
// stop included).
var silent = slog.New(slog.DiscardHandler)

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

type percentiles struct{ p50, p99 time.Duration }

func percentilesOf(lat []time.Duration) percentiles {
	if len(lat) == 0 {
		return percentiles{}
	}
	slices.Sort(lat)
	return percentiles{p50: lat[len(lat)/2], p99: lat[min(len(lat)-1, len(lat)*99/100)]}
}

type churnResult struct {
	react              percentiles
	reads              map[string]percentiles
	created, completed int
	cpuPerClaim        time.Duration
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func poolGroup(i, groups int) string { return fmt.Sprintf("p%02d", i%groups) }

func runChurn(b *testing.B, slots int) churnResult {
	b.StopTimer()
	h := handlerstest.New(b)
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Timing: churnTiming, Log: silent})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()

	groups := 100
	if slots < 1000 {
		groups = 1
	}
	for g := range groups {
		declare(b, h, poolGroup(g, groups), events.GroupSpec{}, handlerstest.Slots(poolGroup(g, groups)+"-n", slots/groups)...)
	}
	declare(b, h, churnGroup, events.GroupSpec{ReadinessTaints: []events.Taint{}}, handlerstest.Slots("c", churnSlots)...)

	var mu sync.Mutex
	asked := map[string]time.Time{}   // claim -> its ClaimCreated folded
	created := map[string]time.Time{} // claim -> its startup Job created
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
	var measuring atomic.Bool
	var completed atomic.Int64
	release := make(chan string, churnSlots)
	unsubscribe := h.Views.Subscribe(func(e events.Event) {
		switch d := e.Data.(type) {
		case events.ClaimCreated:
			if measuring.Load() {
				mu.Lock()
				asked[d.Claim] = time.Now()
				mu.Unlock()
			}
		case events.ClaimReady:
			if d.Ref.Group == churnGroup {
				release <- d.Ref.Slot
			}
		case events.ClaimCompleted:
			if d.Ref.Group == churnGroup && measuring.Load() {
				completed.Add(1)
			}
		}
	})
	defer unsubscribe()

	// The plane's clock follows the wall clock.
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	bg.Add(1)
	go func() {
		defer bg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				h.Clock.Step(now.Sub(last))
				last = now
			}
		}
	}()
	bg.Add(1)
	go func() {
		defer bg.Done()
		if err := w.Run(ctx); err != nil {
			b.Error(err)
		}
	}()
	// Wait for the reactors' start-up look at every slot.
	eventstest.CheckFor(b, 2*time.Minute, 10*time.Millisecond, func() error {
		if w.Reactors.QueueDepth() > 0 || !w.Cluster.HasSynced() {
			return fmt.Errorf("the start's pass over %d slots has not finished", slots)
		}
		return nil
	})
	// Ready claims are released (cluster-autoscaler's DeleteNodes).
	for range 4 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case slot := <-release:
					_, _ = h.Service.Execute(ctx, decide.DeleteNodes{Group: churnGroup, Nodes: []decide.NodeRef{{Name: slot}}, RequestedBy: "bench"})
				}
			}
		}()
	}
	// cluster-autoscaler's reads, in process, one every 5ms.
	srv := provider.New(h.Views, h.Service, h.Clock, provider.Options{Logger: quiet})
	var readMu sync.Mutex
	readLat := map[string][]time.Duration{}
	bg.Add(1)
	go func() {
		defer bg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			group := poolGroup(i, groups)
			if i%2 == 1 {
				group = churnGroup
			}
			var name string
			var err error
			t0 := time.Now()
			switch i % 3 {
			case 0:
				name = "TargetSize"
				_, err = srv.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: group})
			case 1:
				name = "NodeGroupNodes"
				_, err = srv.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: group})
			default:
				name = "NodeGroups"
				_, err = srv.NodeGroups(ctx, &pb.NodeGroupsRequest{})
			}
			took := time.Since(t0)
			if err != nil {
				if ctx.Err() == nil {
					b.Errorf("%s(%s): %v", name, group, err)
				}
				return
			}
			if measuring.Load() {
				readMu.Lock()
				readLat[name] = append(readLat[name], took)
				readMu.Unlock()
			}
		}
	}()

	// 100 claims a second from four callers (one call waits for its
	// append and the views); a refusal (no free slot) is counted, not fatal.
	var refused atomic.Int64
	asks := func(d time.Duration) {
		const callers = 4
		var wg sync.WaitGroup
		began := time.Now()
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pace := time.NewTimer(time.Hour)
				defer pace.Stop()
				for k := c; ; k += callers {
					at := began.Add(time.Duration(k) * time.Second / churnRate)
					if at.Sub(began) >= d {
						return
					}
					pace.Reset(time.Until(at))
					select {
					case <-ctx.Done():
						return
					case <-pace.C:
					}
					if _, err := h.Service.Execute(ctx, decide.IncreaseSize{Group: churnGroup, Delta: 1, RequestedBy: "bench"}); err != nil {
						refused.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}
	asks(3 * time.Second) // warm up: the churn reaches its steady state
	measuring.Store(true)
	cpu0 := cpuTime(b)
	b.StartTimer()
	asks(churnWindow)
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	measuring.Store(false)
	done := completed.Load()
	if n := refused.Load(); n > 0 {
		b.Logf("%d IncreaseSize calls refused (no free slot in the churn group)", n)
	}

	// Every claim asked during the window gets its Job (bounded wait).
	eventstest.CheckFor(b, time.Minute, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for c := range asked {
			if _, ok := created[c]; !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d claims asked in the window without a startup Job", missing)
		}
		return nil
	})
	cancel()
	var lat []time.Duration
	mu.Lock()
	for c, at := range asked {
		lat = append(lat, max(created[c].Sub(at), 0))
	}
	mu.Unlock()
	res := churnResult{react: percentilesOf(lat), reads: map[string]percentiles{}, created: len(asked), completed: int(done)}
	if done > 0 {
		res.cpuPerClaim = cpu / time.Duration(done)
	}
	readMu.Lock()
	for name, l := range readLat {
		res.reads[name] = percentilesOf(l)
	}
	readMu.Unlock()
	return res
}
