package handlers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
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
