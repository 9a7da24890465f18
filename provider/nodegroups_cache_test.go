package provider

import (
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

func debugOf(t *testing.T, e *env, group string) string {
	t.Helper()
	r, err := e.c.NodeGroups(e.ctx(), &pb.NodeGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range r.GetNodeGroups() {
		if group == "" || g.GetId() == group {
			out = append(out, g.GetId()+" "+g.GetDebug())
		}
	}
	return strings.Join(out, "; ")
}

// An unchanged pool is answered from the built response: no rebuild, so
// (almost) no allocation per call, whatever the pool's size.
func TestNodeGroupsBuiltOncePerChange(t *testing.T) {
	e := newEnv(t, Options{})
	for _, g := range []string{"a", "b", "c", "d"} {
		declare(t, e.h, g, events.GroupSpec{}, slotsNamed(g+"-0", g+"-1", g+"-2", g+"-3")...)
	}
	ctx := e.ctx()
	first, err := e.srv.NodeGroups(ctx, &pb.NodeGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := e.srv.NodeGroups(ctx, &pb.NodeGroupsRequest{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("NodeGroups on unchanged views allocates %.0f times per call: it rebuilds the answer", allocs)
	}
	again, _ := e.srv.NodeGroups(ctx, &pb.NodeGroupsRequest{})
	if again != first {
		t.Errorf("NodeGroups on unchanged views built a new answer")
	}
}

// Every change of the views is in the very next answer: a new group, a
// changed spec, a claim, a retired group.
func TestNodeGroupsNeverStale(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{MinSize: 1}, slotsNamed("w-0", "w-1", "w-2")...)
	if got := debugOf(t, e, ""); got != "workers claimstream group workers: target=0 live=0 free=3 slots=3" {
		t.Fatalf("NodeGroups = %q", got)
	}

	declare(t, e.h, "gpu", events.GroupSpec{MaxSize: 1}, slotsNamed("g-0", "g-1")...)
	r, err := e.c.NodeGroups(e.ctx(), &pb.NodeGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.GetNodeGroups()); n != 2 || r.GetNodeGroups()[0].GetId() != "gpu" || r.GetNodeGroups()[0].GetMaxSize() != 1 {
		t.Fatalf("after declaring gpu: %v", r.GetNodeGroups())
	}

	// The same group declared again with another minSize (a pool file edit).
	var groupSeq uint64
	e.h.Read(func(s *projections.State) { groupSeq = s.Groups["workers"].Seq })
	res, err := e.h.Store.AppendWrites(e.ctx(), events.Write{Aggregate: events.GroupAggregate("workers"), Expected: groupSeq, Events: []events.Event{{
		Time: e.h.Clock.Now().UTC(),
		Data: events.GroupChanged{Ref: events.Ref{Group: "workers", Cause: "test"}, Spec: events.GroupSpec{MinSize: 2, Scaler: events.ScalerClusterAutoscaler}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.h.Views.WaitFor(e.ctx(), res.Last); err != nil {
		t.Fatal(err)
	}
	r, _ = e.c.NodeGroups(e.ctx(), &pb.NodeGroupsRequest{})
	if got := r.GetNodeGroups()[1]; got.GetId() != "workers" || got.GetMinSize() != 2 {
		t.Fatalf("after the minSize change: %v", got)
	}

	ready(t, e.h, "w-0")
	if got := debugOf(t, e, "workers"); !strings.Contains(got, "target=1 live=1 free=2") {
		t.Fatalf("after a ready claim: %q", got)
	}
	e.h.MustExec(decide.IncreaseSize{Group: "workers", Delta: 1, RequestedBy: "test"})
	if got := debugOf(t, e, "workers"); !strings.Contains(got, "target=2 live=2 free=1") {
		t.Fatalf("after IncreaseSize: %q", got)
	}
}

// A slot resting after failed boots becomes free when its pause ends, with
// no event: the cached answer must not outlive the pause.
func TestNodeGroupsRestEndsWithTime(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed("w-0", "w-1")...)
	for range projections.MaxConsecutiveAttempts {
		c := boot(t, e.h, "w-0")
		e.h.MustExec(decide.FailClaim{Claim: c, Reason: projections.ReasonStartupJobFailed})
		if live := liveOf(e.h, "w-0"); live != "" {
			e.h.MustExec(decide.CompleteClaim{Claim: live, Reason: projections.ReasonStartupJobFailed})
		}
	}
	var exhausted bool
	e.h.Read(func(s *projections.State) { exhausted = s.Exhausted("w-0", e.h.Clock.Now()) })
	if !exhausted {
		t.Fatal("w-0 is not resting after its failed boots")
	}
	if got := debugOf(t, e, "workers"); !strings.Contains(got, "free=1 ") {
		t.Fatalf("resting slot counted free: %q", got)
	}
	e.h.Clock.Step(projections.ShutdownAttemptResetGrace + time.Minute)
	if got := debugOf(t, e, "workers"); !strings.Contains(got, "free=2 ") {
		t.Fatalf("after the pause, with no new event: %q", got)
	}
	// And back in time (a clock set back): built again, not served stale.
	e.h.Clock.Step(-(projections.ShutdownAttemptResetGrace + time.Minute))
	if got := debugOf(t, e, "workers"); !strings.Contains(got, "free=1 ") {
		t.Fatalf("clock set back: %q", got)
	}
}
