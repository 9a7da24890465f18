package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// TestSteppedWorldRunsALifecycleAndOnlyItsSlot: a Stepped world takes a
// claim through its whole lifecycle (created, booting, ready, released,
// shut down, completed) on the fake clock, driven by the work items that
// are due; the idle slots of the pool are looked at by the resync only,
// not at every step of the clock.
func TestSteppedWorldRunsALifecycleAndOnlyItsSlot(t *testing.T) {
	h := handlerstest.New(t)
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Log: quiet, Stepped: true, Resync: time.Hour})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	declare(t, h, "g", events.GroupSpec{ClaimTTL: events.Duration(time.Hour)}, handlerstest.Slots("n", 200)...)
	res := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"})
	slot := ""
	h.Read(func(s *projections.State) { slot = s.Claims[res.Claims()[0]].Slot })
	runUntil(t, w, 10*time.Minute, "ready", phaseIs(slot, projections.PhaseReady))
	passes := w.Sim.StartupJobs
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: slot}}, RequestedBy: "test"})
	runUntil(t, w, 10*time.Minute, "completed", phaseIs(slot, projections.PhaseCompleted))
	if passes != 1 || w.Sim.ShutdownJobs != 1 || w.Sim.On(slot) {
		t.Fatalf("startup Jobs %d, shutdown Jobs %d, machine on %v; want 1, 1, off", passes, w.Sim.ShutdownJobs, w.Sim.On(slot))
	}
	// The start looks at the 200 slots and the group's items once; after
	// that only the claimed slot and its group's items ran, not 200 slots
	// at every pass.
	t.Logf("%d passes, %d work items", w.Passes, w.ItemsRun)
	if w.Passes < 10 || w.ItemsRun > 202+10*w.Passes {
		t.Fatalf("%d work items in %d passes over a 200-slot pool with one claim", w.ItemsRun, w.Passes)
	}
}

// TestAGroupsCallsWakeItsScalerNotEverySlot: a call on a group writes
// group events that fold nothing a slot's reactors read (ScaleRequested,
// SizeIncreased): an accepted call runs the slot it claims and the group's
// items, a refused one the group's scaler, not every slot of the group.
func TestAGroupsCallsWakeItsScalerNotEverySlot(t *testing.T) {
	ctx := context.Background()
	h := handlerstest.New(t)
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Log: quiet, Stepped: true, Resync: time.Hour})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	declare(t, h, "g", events.GroupSpec{MaxSize: 150, ClaimTTL: events.Duration(time.Hour)}, handlerstest.Slots("n", 200)...)
	if _, err := w.Pass(ctx); err != nil { // the start's look at every item
		t.Fatal(err)
	}
	itemsOf := func(cmd decide.Command) int {
		t.Helper()
		before := w.ItemsRun
		if _, err := h.Service.Execute(ctx, cmd); err != nil && decide.CodeOf(err) == 0 {
			t.Fatal(err)
		}
		if _, err := w.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		return w.ItemsRun - before
	}
	if n := itemsOf(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"}); n > 10 {
		t.Fatalf("an accepted IncreaseSize of 1 on a 200-slot group ran %d work items", n)
	}
	if n := itemsOf(decide.IncreaseSize{Group: "g", Delta: 500, RequestedBy: "test"}); n > 2 {
		t.Fatalf("a refused IncreaseSize ran %d work items", n)
	}
}

// TestSteppedWorldsOfOneSeedWriteTheSameLog: two Stepped worlds of the same
// seed, asked the same (claims on many slots at once, then their release),
// write the same events in the same order: a Step runs its due items in a
// fixed order and sees every event and cache change the last one made, so
// a replay gives one answer for one seed.
func TestSteppedWorldsOfOneSeedWriteTheSameLog(t *testing.T) {
	run := func() []string {
		h := handlerstest.New(t)
		w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 3, Log: quiet, Stepped: true, Resync: time.Hour})
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		declare(t, h, "g", events.GroupSpec{ClaimTTL: events.Duration(time.Hour)}, handlerstest.Slots("n", 30)...)
		for round := range 3 {
			res := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 12, RequestedBy: "test"})
			if err := w.RunFor(context.Background(), 10*time.Minute); err != nil {
				t.Fatal(err)
			}
			var nodes []decide.NodeRef
			h.Read(func(s *projections.State) {
				for _, c := range res.Claims() {
					nodes = append(nodes, decide.NodeRef{Name: s.Claims[c].Slot})
				}
			})
			h.MustExec(decide.DeleteNodes{Group: "g", Nodes: nodes, RequestedBy: "test"})
			if err := w.RunFor(context.Background(), 10*time.Minute); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		var out []string
		last, err := h.Store.LastSeq(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Store.Read(context.Background(), 1, last, func(e events.Event) error {
			out = append(out, e.Time.Format(time.RFC3339Nano)+" "+e.Subject)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := run(), run()
	if len(a) < 300 {
		t.Fatalf("only %d events: the script did not run", len(a))
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			t.Fatalf("event %d differs: %q, then %q (%d and %d events)", i+1, a[i], b[i], len(a), len(b))
		}
	}
	if len(a) != len(b) {
		t.Fatalf("%d events, then %d", len(a), len(b))
	}
}

// TestTheSimulatedClusterKeepsNoLogOfItsCalls: client-go's fake clientset
// keeps a copy of every call it answered (Actions); the simulator drops
// them at each step, so a long run does not hold every Job and Node it
// ever wrote.
func TestTheSimulatedClusterKeepsNoLogOfItsCalls(t *testing.T) {
	h := handlerstest.New(t)
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Log: quiet, Stepped: true})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	declare(t, h, "g", events.GroupSpec{ClaimTTL: events.Duration(time.Hour)}, handlerstest.Slots("n", 4)...)
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "test"})
	if err := w.RunFor(context.Background(), 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if w.Sim.StartupJobs != 2 {
		t.Fatalf("%d startup Jobs, want 2", w.Sim.StartupJobs)
	}
	// A step drops what the calls before it left; the informers' watches
	// may have added one or two since.
	if _, err := w.Sim.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(w.Fake.Actions()); n > 2 {
		t.Fatalf("the fake clientset holds %d calls after a step, want none kept", n)
	}
}
