package handlers_test

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

func TestMachineGone(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.bootToReady("g", "a")
	e.setReady("a", false)
	e.passes()
	c := e.claim("a")
	if c.MachineOffSince == nil || !c.MachineOffSince.Equal(e.h.Clock.Now()) {
		t.Fatalf("off clock: %v", c.MachineOffSince)
	}
	e.step(5 * time.Minute)
	e.setReady("a", true)
	e.passes()
	if c := e.claim("a"); c.MachineOffSince != nil || c.Phase != projections.PhaseReady {
		t.Fatalf("back on: %v %s", c.MachineOffSince, c.Phase)
	}
	e.setReady("a", false)
	e.passes()
	e.step(projections.DefaultBudget - time.Second)
	e.passes()
	if c := e.claim("a"); c.Phase != projections.PhaseReady {
		t.Fatalf("failed early: %s", c.Phase)
	}
	e.step(time.Second)
	e.passes()
	c = e.claim("a")
	if c.Phase != projections.PhaseFailed || c.Reason != projections.ReasonMachineGone {
		t.Fatalf("%s/%s", c.Phase, c.Reason)
	}
	want := []events.Type{events.TypeClaimCreated, events.TypeClaimBooting, events.TypeJobObserved, events.TypeHostJoined, events.TypeJobObserved, events.TypeClaimReady, events.TypeMachineObservedOff, events.TypeMachineObservedOn, events.TypeMachineObservedOff, events.TypeClaimFailed, events.TypeShutdownFired, events.TypeJobObserved}
	if got := timelineTypes(c); len(got) != len(want) {
		t.Fatalf("timeline %v, want %v", got, want)
	}
}
