package handlers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
)

// A decrease under minSize names the target size it would reach and the
// current one.
func TestDecreaseUnderMinSizeNamesBothSizes(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("beta", events.GroupSpec{MinSize: 1}, handlerstest.Slots("b", 3)...)
	h.MustExec(decide.IncreaseSize{Group: "beta", Delta: 2, RequestedBy: "ca"})
	_, err := h.Exec(decide.DecreaseTargetSize{Group: "beta", Delta: -2, RequestedBy: "ca"})
	want := "decrease of group beta by 2 would take its target size from 2 to 0, under minSize 1"
	if decide.CodeOf(err) != decide.CodeFailedPrecondition || err.Error() != want {
		t.Fatalf("refusal %q, want %q", err, want)
	}
}

// An increase refused for maxSize while the claims holding the slots are
// marked for scale-down says so, with the target size NodeGroupTargetSize
// reports beside the claims counted.
func TestIncreaseOverMaxSizeExplainsClaimsTheTargetSizeDoesNotCount(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.bootToReady("g", "a")
	e.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	_, err := e.h.Exec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	want := "size increase of group g by 1 too large: 1 of its slots in service hold live claims, and 1 + 1 > maxSize 1 " +
		"(target size 0: 1 of those claims are marked for scale-down, which the target size no longer counts, and hold their slots until their machine is off)"
	if decide.CodeOf(err) != decide.CodeFailedPrecondition || err == nil || err.Error() != want {
		t.Fatalf("refusal %q, want %q", err, want)
	}
}

// The refusal of a replica that the log names as the last leader but that
// leads no epoch says what is true of it: stepped down, holding the lease
// again, or restarted.
func TestNotLeaderRefusalSaysWhyTheLastLeaderDoesNotLead(t *testing.T) {
	h := handlerstest.New(t)
	lease := newTestLease("claimstream-0", true)
	l := handlers.NewLeadership(lease, h.Store, h.Views, h.Clock, nil)
	if _, err := l.Elect(context.Background(), "", "", "test", nil); err != nil {
		t.Fatal(err)
	}
	l.StepDown()
	lease.leading.Store(false)
	check := func(l *handlers.Leadership, want string) {
		t.Helper()
		_, err := l.Permit()
		if decide.CodeOf(err) != decide.CodeUnavailable || err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %v, want %q", err, want)
		}
	}
	check(l, "this replica led epoch 1, stepped down and has not re-established its lease; no other replica has been elected since")
	lease.leading.Store(true)
	check(l, "this replica led epoch 1, holds the lease again and is electing itself for the next epoch")
	lease.leading.Store(false)
	check(handlers.NewLeadership(lease, h.Store, h.Views, h.Clock, nil), "this replica led epoch 1 before it restarted and has not re-established its lease")
}
