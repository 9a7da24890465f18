package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// A machine modelled from a history of fast boots (seconds, as the e2e
// suite's machines on a real control plane) boots, shuts down and clears
// its readiness gate in the recorded durations, not after the simulator's
// default Job (20s) and way to Ready (20s) or its default taint delay
// (15s): a sample shorter than those stages shrinks them.
func TestModelledFastMachineTakesItsRecordedDurations(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{ReadinessTaints: []events.Taint{{Key: "example.com/not-ready", Effect: "NoExecute"}}}, "a")
	const boot, shutdown, gate = 5 * time.Second, 3 * time.Second, 2 * time.Second
	w.Sim.SetKnobs("a", sim.Knobs{BootSamples: []time.Duration{boot}, ShutdownSamples: []time.Duration{shutdown}, TaintSamples: []time.Duration{gate}})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 5*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	runUntil(t, w, 5*time.Minute, "completed", phaseIs("a", projections.PhaseCompleted))

	var booting, fired, ready, on, off time.Time
	for _, e := range readAll(t, h) {
		switch d := e.Data.(type) {
		case events.ClaimBooting:
			booting = e.Time
		case events.MachinePoweredOn:
			on = d.At
		case events.ClaimReady:
			ready = e.Time
		case events.ShutdownFired:
			fired = e.Time
		case events.MachinePoweredOff:
			off = d.At
		}
	}
	// The passes run at the instants something is due: each stage ends
	// when its sample says, to the millisecond the clock steps by; a stage
	// the reactors end on what their informers show ends the informers'
	// lag later.
	near := func(what string, got, want time.Duration) {
		t.Helper()
		if d := (got - want).Abs(); d > time.Millisecond {
			t.Errorf("%s took %s, want the modelled %s", what, got, want)
		}
	}
	near("the boot (ClaimBooting to the Node Ready)", on.Sub(booting), boot)
	near("the readiness gate (Node Ready to ClaimReady)", ready.Sub(on), gate+kube.DefaultWatchDelay)
	near("the shutdown (ShutdownFired to the Node NotReady)", off.Sub(fired), shutdown)
}

// A boot recorded longer than the Job and the way to Ready keeps their
// durations: the Node registers late, Ready when the sample says.
func TestModelledSlowMachineRegistersLate(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	const boot = 100 * time.Second
	w.Sim.SetKnobs("a", sim.Knobs{BootSamples: []time.Duration{boot}})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 10*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	var booting, on time.Time
	for _, e := range readAll(t, h) {
		switch d := e.Data.(type) {
		case events.ClaimBooting:
			booting = e.Time
		case events.MachinePoweredOn:
			on = d.At
		}
	}
	if got := on.Sub(booting); (got - boot).Abs() > time.Millisecond {
		t.Fatalf("the boot took %s, want the modelled %s", got, boot)
	}
}

func readAll(t *testing.T, h *handlerstest.Harness) []events.Event {
	t.Helper()
	var out []events.Event
	if err := h.Store.Read(context.Background(), 1, 0, func(e events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
