package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// playDay is a day of a pool of groups×perGroup slots: every two hours
// each group is asked for a fifth of its slots (cluster-autoscaler's
// IncreaseSize), and an hour later the nodes it got are given back
// (DeleteNodes of the group's ready claims); twelve waves. Each step goes
// through World.Apply and the time between through World.RunFor, as
// World.Play plays a scenario file.
func playDay(ctx context.Context, w *sim.World, h *handlerstest.Harness, groups, perGroup int) error {
	for range 12 {
		for g := range groups {
			if err := w.Apply(ctx, sim.Step{IncreaseSize: &sim.SizeChange{Group: poolGroup(g, groups), Delta: perGroup / 5}}); err != nil {
				return err
			}
		}
		if err := w.RunFor(ctx, time.Hour); err != nil {
			return err
		}
		ready := map[string][]string{}
		h.Read(func(s *projections.State) {
			for _, c := range s.Claims {
				if c.Phase == projections.PhaseReady && c.WantsMachine() {
					ready[c.Group] = append(ready[c.Group], c.Slot)
				}
			}
		})
		for g := range groups {
			group := poolGroup(g, groups)
			if len(ready[group]) == 0 {
				continue
			}
			if err := w.Apply(ctx, sim.Step{DeleteNodes: &sim.NodesChange{Group: group, Nodes: ready[group]}}); err != nil {
				return err
			}
		}
		if err := w.RunFor(ctx, time.Hour); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkSimulatedDay plays a day (24 hours on the fake clock) of a
// 10,000-slot pool in 100 groups: twelve waves of 2,000 claims (a fifth of
// every group), each given back an hour later, through the real store,
// views, reactors, kube adapter over the fake clientset and the simulated
// machines (World.Play, as `serve --simulate --scenario` plays a story).
// "every-slot" is the World's default pass (every reactor on every slot at
// each step of the clock); "stepped" runs only the due work items
// (handlers.Stepper) with a full resync every 10 simulated minutes. The
// baseline is the same day of a 1,000-slot pool in 100 groups.
//
//	go test ./handlers/sim/ -run '^$' -bench BenchmarkSimulatedDay -benchtime 1x -count 3 -timeout 60m
func BenchmarkSimulatedDay(b *testing.B) {
	for _, run := range []struct {
		perGroup int
		stepped  bool
	}{{10, false}, {10, true}, {100, true}} {
		const groups = 100
		perGroup, stepped := run.perGroup, run.stepped
		loop := "every-slot"
		if stepped {
			loop = "stepped"
		}
		b.Run(fmt.Sprintf("slots=%d/loop=%s", groups*perGroup, loop), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h := handlerstest.New(b)
				w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Log: silent, Stepped: stepped, Resync: 10 * time.Minute})
				began := time.Now()
				ctx := context.Background()
				if err := w.Start(ctx); err != nil {
					b.Fatal(err)
				}
				for g := range groups {
					names := make([]string, perGroup)
					for j := range names {
						names[j] = fmt.Sprintf("%s-n%d", poolGroup(g, groups), j)
					}
					declare(b, h, poolGroup(g, groups), events.GroupSpec{ClaimTTL: events.Duration(3 * time.Hour)}, names...)
				}
				b.Logf("pool declared in %s", time.Since(began).Round(time.Millisecond))
				first := h.Views.Seq()
				b.StartTimer()
				began = time.Now()
				if err := playDay(ctx, w, h, groups, perGroup); err != nil {
					b.Fatal(err)
				}
				took := time.Since(began)
				b.StopTimer()
				var completed, live int
				h.Read(func(s *projections.State) {
					for _, sl := range s.Slots {
						if sl.LastClaim != nil && sl.LastClaim.Phase == projections.PhaseCompleted {
							completed++
						}
					}
					for _, c := range s.Claims {
						if c.IsLive() {
							live++
						}
					}
				})
				evs := h.Views.Seq() - first
				want := 12 * groups * (perGroup / 5)
				b.ReportMetric(took.Seconds(), "wall-s/day")
				b.ReportMetric(float64(evs), "events")
				b.Logf("slots=%d: a day in %s wall, %d events, %d claims asked, %d slots whose last claim completed, %d live at the end, %s", groups*perGroup, took.Round(time.Millisecond), evs, want, completed, live, w.Sim)
				w.Stop()
			}
		})
	}
}
