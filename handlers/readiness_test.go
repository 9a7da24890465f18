package handlers_test

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

func TestReadinessGatePasses(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.increase("g", 1)
	e.passes()
	e.finishJob(e.claim("a").StartupJob, true, "")
	e.step(30 * time.Second)
	e.register("a", false, cilium)
	e.passes()
	if n, _ := e.cl.Node("a"); n.Labels["claimstream.dev/rack"] != "a" || !n.HasTaint(events.Taint{Key: "claimstream.dev/slow", Effect: "PreferNoSchedule"}) {
		t.Fatalf("slot config not applied: %+v", n)
	}
	e.setReady("a", true)
	e.passes()
	if c := e.claim("a"); c.Phase != projections.PhaseBooting {
		t.Fatalf("ready with the readiness taint on: %s", c.Phase)
	}
	// Cordoned by someone: the gate uncordons on the way to ready.
	if err := e.cl.Cordon(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := e.f.RemoveNodeTaints(t.Context(), "a", cilium.Key); err != nil {
		t.Fatal(err)
	}
	e.passes()
	c := e.claim("a")
	if c.Phase != projections.PhaseReady || c.DeadlineAt != nil || c.Node != "a" {
		t.Fatalf("%s deadline %v node %q", c.Phase, c.DeadlineAt, c.Node)
	}
	if n, _ := e.cl.Node("a"); n.Unschedulable {
		t.Fatal("still cordoned")
	}
}

func TestReadinessGateTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		register bool
		wait     time.Duration
	}{
		{"registration", false, 90 * time.Second},
		{"gate", true, 4 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRenv(t)
			e.declare("g", events.GroupSpec{}, false, "a")
			e.increase("g", 1)
			e.passes()
			e.finishJob(e.claim("a").StartupJob, true, "")
			if tc.register {
				e.register("a", true, cilium)
				if err := e.cl.Cordon(t.Context(), "a"); err != nil {
					t.Fatal(err)
				}
			}
			e.passes()
			e.step(tc.wait - time.Second)
			e.passes()
			if c := e.claim("a"); c.Phase != projections.PhaseBooting {
				t.Fatalf("failed early: %s", c.Phase)
			}
			e.step(time.Second)
			e.passes()
			c := e.claim("a")
			if c.Phase != projections.PhaseFailed || c.Reason != projections.ReasonReadinessGateTimeout || !c.ForceShutdown || c.LastShutdownJob == "" {
				t.Fatalf("%s/%s force %t shutdown %q", c.Phase, c.Reason, c.ForceShutdown, c.LastShutdownJob)
			}
		})
	}
}

func TestReadinessGateCustomTimeouts(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{ReadinessTaints: []events.Taint{}, Lifecycle: events.Lifecycle{RegistrationWait: events.Duration(10 * time.Second)}}, false, "a")
	e.increase("g", 1)
	e.passes()
	e.finishJob(e.claim("a").StartupJob, true, "")
	e.step(10 * time.Second)
	e.passes()
	if c := e.claim("a"); c.Reason != projections.ReasonReadinessGateTimeout {
		t.Fatalf("%s/%s", c.Phase, c.Reason)
	}
}
