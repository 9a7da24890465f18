package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
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
	res := h.MustExec(handlers.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"})
	slot := ""
	h.Read(func(s *projections.State) { slot = s.Claims[res.Claims()[0]].Slot })
	runUntil(t, w, 10*time.Minute, "ready", phaseIs(slot, projections.PhaseReady))
	passes := w.Sim.StartupJobs
	h.MustExec(handlers.DeleteNodes{Group: "g", Nodes: []handlers.NodeRef{{Name: slot}}, RequestedBy: "test"})
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
