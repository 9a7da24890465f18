package handlers_test

import (
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
)

func TestInputLaw(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a", "b")
	e.register("a", true) // up, no claim
	e.passes()
	sl := e.slot("a")
	if sl.LastShutdown == nil || sl.LastShutdown.Claim != "" || !sl.LastShutdown.Force || sl.LastShutdown.Cause == "" {
		t.Fatalf("no input-law shutdown: %+v", sl.LastShutdown)
	}
	if n, _ := e.cl.Node("a"); !n.Unschedulable || !e.jobs()[sl.LastShutdown.Job] {
		t.Fatalf("cordoned %t jobs %v", n.Unschedulable, e.jobs())
	}
	// Stuck: the Job succeeds, the machine stays up: bounded, then paused.
	for i := 0; i < 5; i++ {
		for j := range e.jobs() {
			e.finishJob(j, true, "")
		}
		e.step(handlers.ShutdownSettle)
		e.passes()
	}
	if n := len(e.jobs()); n != 3 {
		t.Fatalf("%d input-law shutdowns, want 3 then a pause", n)
	}
	// A claimed machine is left alone.
	e.increase("g", 1)
	e.passes()
	if e.slot("b").LastShutdown != nil {
		t.Fatal("shut down a claimed slot")
	}
}
