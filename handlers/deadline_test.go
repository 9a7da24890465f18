package handlers_test

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

func TestDeadlineFailsABootWindowClaim(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{MaxNodeProvisionTime: events.Duration(20 * time.Minute)}, false, "a")
	// A machine up with no claim: the input law's shutdown runs and never
	// finishes, so the claim that follows waits in pending.
	e.register("a", true)
	e.passes()
	e.increase("g", 1)
	e.passes()
	c := e.claim("a")
	d := e.passes()
	if want := c.DeadlineAt.Sub(e.h.Clock.Now()); d > want+time.Second || d <= 0 {
		t.Fatalf("requeue %s, want about %s", d, want)
	}
	e.step(c.DeadlineAt.Sub(e.h.Clock.Now()))
	e.passes()
	if c := e.claim("a"); c.Phase != projections.PhasePending {
		t.Fatalf("at the deadline itself: %s/%s", c.Phase, c.Reason)
	}
	e.step(time.Millisecond)
	e.passes()
	c = e.claim("a")
	// Failed with a force shutdown (here the input law's running shutdown
	// stands for it: the slot's power-off is already in flight).
	if c.Phase != projections.PhaseFailed || c.Reason != projections.ReasonDeadlineExceeded || !c.ForceShutdown {
		t.Fatalf("%s/%s force %t shutdown %q", c.Phase, c.Reason, c.ForceShutdown, c.LastShutdownJob)
	}
}

func TestDeadlineNeverFailsAReadyClaim(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	c := e.bootToReady("g", "a")
	e.step(24 * time.Hour)
	e.passes()
	if got := e.claim("a"); got.Phase != projections.PhaseReady || got.Name != c.Name {
		t.Fatalf("%s/%s", got.Phase, got.Reason)
	}
}
