package handlers_test

import (
	"context"
	"testing"

	"github.com/claimstream/claimstream/events"
)

func TestObserveWritesOnChangeOnly(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.increase("g", 1)
	e.passes()
	e.register("a", false, cilium)
	seq := e.h.Views.Seq()
	e.pass()
	if e.h.Views.Seq() != seq+1 {
		t.Fatalf("registration: %d events", e.h.Views.Seq()-seq)
	}
	if sl := e.slot("a"); !sl.Node.Present || sl.Node.Ready || len(sl.Node.Taints) != 1 {
		t.Fatalf("observed %+v", sl.Node)
	}
	seq = e.h.Views.Seq()
	e.pass()
	e.pass()
	if e.h.Views.Seq() != seq {
		t.Fatalf("unchanged node written again: %d events", e.h.Views.Seq()-seq)
	}
	_ = context.Background()
}
