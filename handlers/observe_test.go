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
	// The startup Job succeeded (its report, none here, names the host the
	// claim expects): the host is matched from then on.
	e.finishJob(e.claim("a").StartupJob, true, "")
	e.passes()
	e.register("a", false, cilium)
	seq := e.h.Views.Seq()
	e.pass()
	// The registration is observed once (NodeObserved) and matched to the
	// booting claim once (HostJoined).
	if e.h.Views.Seq() != seq+2 {
		t.Fatalf("registration: %d events, want NodeObserved and HostJoined", e.h.Views.Seq()-seq)
	}
	if sl := e.slot("a"); !sl.Node.Present || sl.Node.Ready || len(sl.Node.Taints) != 1 {
		t.Fatalf("observed %+v", sl.Node)
	}
	if j := e.claim("a").Joined; j == nil || j.Node != "a" || j.MatchedBy != "providerID" {
		t.Fatalf("host join %+v, want node a matched by providerID", j)
	}
	// The readiness gate gave the Node the slot's labels and taints in that
	// pass: one more observation, then nothing while nothing changes.
	e.pass()
	seq = e.h.Views.Seq()
	e.pass()
	e.pass()
	if e.h.Views.Seq() != seq {
		t.Fatalf("unchanged node written again: %d events", e.h.Views.Seq()-seq)
	}
	_ = context.Background()
}
