package sim_test

import (
	"context"
	"flag"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

var streams atomic.Int64

// defaultFlag sets a rapid flag unless the command line set it.
func defaultFlag(name, value string) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if !set {
		_ = flag.Set(name, value)
	}
}

// TestPropertyLifecycleInvariants drives random commands, machine
// behaviours (slow boot, failed boot, machine that never registers,
// vanishing machine, stuck shutdown, a machine switched on by hand),
// process restarts and clock advances through the simulator and the real
// reactors, and checks the invariants (docs/design.md) 3, 4, 5 and 7 after every
// step. (Run longer with -rapid.checks=200 -rapid.steps=60.)
func TestPropertyLifecycleInvariants(t *testing.T) {
	defaultFlag("rapid.checks", "12")
	defaultFlag("rapid.steps", "24")
	slots := []string{"a", "b.lan", "c"}
	rapid.Check(t, func(rt *rapid.T) {
		n := streams.Add(1)
		// Its own server: a restart restarts the server.
		h := handlerstest.New(t)
		w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: int64(n), Log: quiet,
			Timing: sim.Timing{FailureRate: rapid.SampledFrom([]float64{0, 0.2}).Draw(rt, "failureRate")}})
		ctx := context.Background()
		if err := w.Start(ctx); err != nil {
			rt.Fatal(err)
		}
		defer w.Stop()
		declare(t, h, "g", events.GroupSpec{MaxNodeProvisionTime: events.Duration(rapid.SampledFrom([]time.Duration{0, 15 * time.Minute}).Draw(rt, "provision"))}, slots...)
		slot := rapid.SampledFrom(slots)
		upSince := map[string]time.Time{}
		exec := func(cmd decide.Command) {
			if _, err := h.Exec(cmd); err != nil && decide.CodeOf(err) == 0 {
				rt.Fatalf("%#v: %v", cmd, err)
			}
		}
		run := func(d time.Duration) {
			if err := w.RunFor(ctx, d); err != nil {
				rt.Fatal(err)
			}
		}
		check := func() {
			now := h.Clock.Now()
			jobs, err := w.Fake.BatchV1().Jobs("claimstream").List(ctx, metav1.ListOptions{})
			if err != nil {
				rt.Fatal(err)
			}
			jobByName := map[string]bool{}
			for _, j := range jobs.Items {
				jobByName[j.Name] = true
			}
			h.Read(func(s *projections.State) {
				for _, c := range s.Claims {
					// Invariant 3: no boot-window claim outlives its deadline
					// + one reconcile period; an overdue one ends failed and
					// its machine is shut down.
					if c.InBootWindow() && c.DeadlineAt != nil && now.After(c.DeadlineAt.Add(projections.ReconcilePeriod)) {
						rt.Fatalf("invariant 3: claim %s is %s at %s, deadline %s", c.Name, c.Phase, now, c.DeadlineAt)
					}
					if c.Phase == projections.PhaseFailed && c.ForceShutdown && c.LastShutdownJob == "" {
						sl := s.Slots[c.Slot]
						if s.LiveOfSlot(c.Slot) == nil && (sl.LastShutdown == nil || sl.LastShutdown.At.Before(*c.FinishedAt)) {
							rt.Fatalf("invariant 3: failed claim %s (%s) has no shutdown", c.Name, c.Reason)
						}
					}
					// Invariant 4: a claim that reached ready is never failed by the deadline.
					if c.ReadyAt != nil && c.Reason == projections.ReasonDeadlineExceeded {
						rt.Fatalf("invariant 4: ready claim %s failed DeadlineExceeded", c.Name)
					}
					// Invariant 7: a booting claim has its startup Job (or its
					// node registered after the boot began): nothing stuck.
					if c.Phase == projections.PhaseBooting && !jobByName[c.StartupJob] {
						if n, ok := w.Cluster.Node(s.Slots[c.Slot].NodeName()); !ok || n.CreatedAt.Before(*c.BootCommittedAt) {
							rt.Fatalf("invariant 7: booting claim %s has no startup Job %s", c.Name, c.StartupJob)
						}
					}
					// A ready claim's host joined under the slot's Node name:
					// its own, or the one its startup Job reported.
					if c.Phase == projections.PhaseReady && (c.Joined == nil || c.Joined.Node != s.Slots[c.Slot].NodeName()) {
						rt.Fatalf("ready claim %s joined %+v, the slot's node is %s", c.Name, c.Joined, s.Slots[c.Slot].NodeName())
					}
					// Invariant 7: a marked ready claim has its shutdown Job
					// once one was fired.
					if c.Phase == projections.PhaseReady && c.LastShutdownJob != "" && !jobByName[c.LastShutdownJob] {
						rt.Fatalf("invariant 7: shutdown Job %s of %s missing", c.LastShutdownJob, c.Name)
					}
				}
				// Invariant 7: no orphan Job: every unfinished Job names a
				// claim the views know, or is a slot's input-law shutdown.
				for _, j := range jobs.Items {
					claim := j.Labels[handlers.LabelClaim]
					if claim != "" && s.Claims[claim] == nil && !kube.JobStateOf(&j).Finished() {
						rt.Fatalf("invariant 7: Job %s of unknown claim %s", j.Name, claim)
					}
				}
				// Invariant 5: no machine observed up without a live claim
				// stays up past one reconcile period plus its shutdown,
				// unless its shutdowns do nothing or are paused after
				// ShutdownAttemptLimit of them did nothing: a pause that
				// began under ShutdownNoop runs its course after the knob
				// changes (rapid found one), and the bound counts from its
				// end.
				for _, name := range slots {
					sl := s.Slots[name]
					paused := sl.ShutdownPausedUntil != nil && now.Before(*sl.ShutdownPausedUntil)
					if !sl.PoweredOn() || s.LiveOfSlot(name) != nil || w.Sim.Knobs(name).ShutdownNoop || paused {
						delete(upSince, name)
						continue
					}
					if _, ok := upSince[name]; !ok {
						upSince[name] = now
					}
					if bound := projections.ReconcilePeriod + 20*time.Second + handlers.ShutdownSettle + time.Second; now.Sub(upSince[name]) > bound {
						rt.Fatalf("invariant 5: machine %s up with no live claim since %s (now %s)", name, upSince[name], now)
					}
				}
			})
		}

		rt.Repeat(map[string]func(*rapid.T){
			"increase": func(t *rapid.T) {
				exec(decide.IncreaseSize{Group: "g", Delta: rapid.IntRange(1, 3).Draw(t, "delta"), RequestedBy: "ca"})
			},
			"decrease": func(t *rapid.T) {
				exec(decide.DecreaseTargetSize{Group: "g", Delta: -rapid.IntRange(1, 2).Draw(t, "delta"), RequestedBy: "ca"})
			},
			"deleteNodes": func(t *rapid.T) {
				// cluster-autoscaler names the Node it sees: the slot's, or
				// the host's its startup Job reported.
				ref := decide.NodeRef{Name: slot.Draw(t, "slot")}
				h.Read(func(s *projections.State) {
					ref = decide.NodeRef{Name: s.Slots[ref.Name].NodeName(), ProviderID: s.Slots[ref.Name].CurrentProviderID()}
				})
				exec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{ref}, RequestedBy: "ca"})
			},
			"knob": func(t *rapid.T) {
				k := rapid.SampledFrom([]sim.Knobs{
					{}, {BootExtra: 10 * time.Minute}, {FailStartups: 1}, {NeverBoots: true}, {TaintStays: true}, {JobHangs: true}, {ShutdownNoop: true},
				}).Draw(t, "knobs")
				name := slot.Draw(t, "slot")
				if rapid.Bool().Draw(t, "otherName") {
					// A cloud instance: its Node is named by its provider.
					id := "i-" + strings.ReplaceAll(name, ".", "-")
					k.InstanceID, k.Node, k.ProviderID = id, "ip-"+id, "aws:///eu-west-1a/"+id
				}
				w.Sim.SetKnobs(name, k)
			},
			"vanish": func(t *rapid.T) {
				if err := w.Sim.Vanish(ctx, slot.Draw(t, "slot"), rapid.Bool().Draw(t, "deleteNode")); err != nil {
					t.Fatal(err)
				}
			},
			"powerOn": func(t *rapid.T) { w.Sim.PowerOn(slot.Draw(t, "slot")) },
			"restart": func(t *rapid.T) {
				// The process dies: the machines go on for a while alone.
				w.Stop()
				simOnlyR(t, h, w, rapid.SampledFrom([]time.Duration{0, 10 * time.Second, 2 * time.Minute}).Draw(t, "down"))
				h.Restart()
				if err := w.Restart(ctx, h.Views, h.Service); err != nil {
					t.Fatal(err)
				}
				upSince = map[string]time.Time{}
			},
			"advance": func(t *rapid.T) {
				run(rapid.SampledFrom([]time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 13 * time.Minute, 40 * time.Minute}).Draw(t, "by"))
			},
			"": func(t *rapid.T) {
				run(0)
				check()
			},
		})
	})
}

func simOnlyR(t *rapid.T, h *handlerstest.Harness, w *sim.World, d time.Duration) {
	end := h.Clock.Now().Add(d)
	for {
		if _, err := w.Sim.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		at, ok := w.Sim.NextAt()
		if !ok || at.After(end) {
			h.Clock.SetTime(end)
			if _, err := w.Sim.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
			return
		}
		if at.After(h.Clock.Now()) {
			h.Clock.SetTime(at)
		}
	}
}
