package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// BenchmarkSimulatedPool: a simulated pool of 500 slots through 1,000
// claim lifecycles (two waves of 500: IncreaseSize to ready, DeleteNodes to
// completed and collected) on a fake clock, with the real store, views,
// reactors and kube adapter. Reports events per claim and wall time per
// 1,000 lifecycles.
//
//	go test ./handlers/sim/ -run '^$' -bench BenchmarkSimulatedPool -benchtime 1x
func BenchmarkSimulatedPool(b *testing.B) {
	const slots, lifecycles = 500, 1000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := handlerstest.New(b)
		w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Log: quiet})
		ctx := context.Background()
		if err := w.Start(ctx); err != nil {
			b.Fatal(err)
		}
		names := make([]string, slots)
		for j := range names {
			names[j] = fmt.Sprintf("n-%03d", j)
		}
		declare(b, h, "g", events.GroupSpec{ClaimTTL: events.Duration(10 * time.Minute)}, names...)
		first := h.Views.Seq()
		b.StartTimer()
		began := time.Now()
		done := 0
		for done < lifecycles {
			n := min(slots, lifecycles-done)
			h.MustExec(decide.IncreaseSize{Group: "g", Delta: n, RequestedBy: "bench"})
			ok, err := w.RunUntil(ctx, time.Hour, func(s *projections.State) bool {
				r := 0
				for _, c := range s.Claims {
					if c.Phase == projections.PhaseReady {
						r++
					}
				}
				return r == n
			})
			if err != nil || !ok {
				b.Fatalf("wave to ready: %v %v (%s)", ok, err, w.Sim)
			}
			var nodes []decide.NodeRef
			for _, name := range names[:n] {
				nodes = append(nodes, decide.NodeRef{Name: name})
			}
			h.MustExec(decide.DeleteNodes{Group: "g", Nodes: nodes, RequestedBy: "bench"})
			ok, err = w.RunUntil(ctx, 2*time.Hour, func(s *projections.State) bool { return len(s.Claims) == 0 })
			if err != nil || !ok {
				b.Fatalf("wave to collected: %v %v (%s)", ok, err, w.Sim)
			}
			done += n
		}
		took := time.Since(began)
		b.StopTimer()
		evs := h.Views.Seq() - first
		b.ReportMetric(float64(evs)/float64(lifecycles), "events/claim")
		b.ReportMetric(took.Seconds(), "wall-s/1000-lifecycles")
		b.ReportMetric(float64(took.Microseconds())/float64(lifecycles), "µs/claim")
		w.Stop()
		b.StartTimer()
	}
}
