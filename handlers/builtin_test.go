package handlers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// TestBuiltinGroupFailureLeavesOtherGroupsTheirPass: two built-in groups
// release their idle node after the hold; the cordon of the first group's
// node fails. The error is reported, naming the group, and the second
// group's pass still runs (its node is released and cordoned).
func TestBuiltinGroupFailureLeavesOtherGroupsTheirPass(t *testing.T) {
	e := newRenv(t)
	spec := events.GroupSpec{Scaler: events.ScalerBuiltin, Builtin: &events.BuiltinScaler{PodsPerNode: 1, MaxNodes: 2, Hold: events.Duration(time.Minute)}}
	e.declare("a", spec, false, "a1")
	e.declare("b", spec, false, "b1")
	e.bootToReady("a", "a1")
	e.bootToReady("b", "b1")
	e.passes() // no work: the hold starts
	e.step(2 * time.Minute)
	e.acts.failCordon = map[string]error{"a1": errors.New("apiserver unavailable")}
	ctx := context.Background()
	if err := e.cl.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := e.r.ReconcileAll(ctx)
	if c := e.claim("b1"); c.ScaleDown == nil {
		t.Fatalf("group b's idle node was not released after group a failed: %+v", c.ScaleDown)
	}
	cordoned := false
	for _, x := range e.acts.of("cordon") {
		cordoned = cordoned || x.target == "b1"
	}
	if !cordoned {
		t.Fatal("group b's released node was not cordoned after group a failed")
	}
	if err == nil || !strings.Contains(err.Error(), "group a") || !strings.Contains(err.Error(), "apiserver unavailable") {
		t.Fatalf("pass error %v, want the failure of group a", err)
	}
}

// TestBuiltinScalerKeepsAManualClaim: a claim made by hand on a built-in
// group counts as one of its nodes, but the scaler's teardown after a hold
// with no work releases only its own claims and says so in the decision
// the audit tells; the manual claim stays ready until deleted by hand.
func TestBuiltinScalerKeepsAManualClaim(t *testing.T) {
	e := newRenv(t)
	spec := events.GroupSpec{Scaler: events.ScalerBuiltin, Builtin: &events.BuiltinScaler{PodsPerNode: 1, MaxNodes: 2, Hold: events.Duration(time.Minute)}}
	e.declare("g", spec, false, "m", "s")
	e.h.MustExec(decide.ManualClaim{Slot: "m", By: "carol", Reason: "burn-in"})
	e.passes()
	c := e.claim("m")
	e.finishJob(c.StartupJob, true, "")
	e.register("m", true)
	e.passes()
	e.bootToReady("g", "s")
	e.passes() // no work: the hold starts
	e.step(2 * time.Minute)
	e.passes()
	e.step(2 * time.Minute)
	e.passes()
	if c := e.claim("m"); c.Phase != projections.PhaseReady || c.ScaleDown != nil {
		t.Fatalf("the manual claim is %s (scale-down %+v), want ready and kept", c.Phase, c.ScaleDown)
	}
	if c := e.claim("s"); c.ScaleDown == nil {
		t.Fatal("the scaler's own idle claim was not released")
	}
	var reason string
	e.h.Read(func(s *projections.State) {
		if d := s.Groups["g"].LastDecision; d != nil {
			reason = d.Reason
		}
	})
	if !strings.Contains(reason, "made by hand") {
		t.Fatalf("the last scale decision %q does not say the manual claim is kept", reason)
	}
}
