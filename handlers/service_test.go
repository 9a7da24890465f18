package handlers_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/decide/decidetest"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
)

// 100 callers ask for one machine each of a 10-slot group at once: exactly
// 10 claims, one per slot, and 90 clear refusals.
func TestConcurrentIncreaseSizeFillsExactlyTheSlots(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{}, handlerstest.Slots("s", 10)...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, refused int
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.Exec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case decide.CodeOf(err) == decide.CodeFailedPrecondition:
				refused++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 10 || refused != 90 {
		t.Fatalf("%d succeeded, %d refused; want 10 and 90", ok, refused)
	}
	h.Read(func(s *projections.State) {
		if err := decidetest.CheckInvariants(s); err != nil {
			t.Fatal(err)
		}
		if n := len(s.LiveClaims("g")); n != 10 || s.TargetSize("g") != 10 {
			t.Fatalf("%d live claims, target %d", n, s.TargetSize("g"))
		}
	})
}

// Two services over one store (a leader and a stale one, each with its own
// in-process locks) race for the same slots. Only the expectations stand
// between them, and they are enough: one live claim per slot.
func TestTwoWritersNeverClaimOneSlotTwice(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{}, handlerstest.Slots("s", 10)...)
	other := handlers.NewService(h.Store, h.Views, h.Clock, "/claimstream/stale-leader", nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	conflicts := 0
	for i := 0; i < 40; i++ {
		svc := h.Service
		if i%2 == 1 {
			svc = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svc.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
			mu.Lock()
			defer mu.Unlock()
			conflicts += res.Conflicts
			if err == nil {
				created += len(res.Claims())
			} else if decide.CodeOf(err) != decide.CodeFailedPrecondition {
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	if created != 10 {
		t.Fatalf("created %d claims, want 10", created)
	}
	t.Logf("%d conflicts were resolved by deciding again", conflicts)
	h.Read(func(s *projections.State) {
		if err := decidetest.CheckInvariants(s); err != nil {
			t.Fatal(err)
		}
	})
}

// A decision made from a stale view is refused by the store, whatever the
// decider thought.
func TestStaleDecisionIsRefusedByTheStore(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{}, "a")
	var stale []events.Write
	h.Read(func(s *projections.State) {
		var err error
		stale, err = decide.IncreaseSize{Group: "g", Delta: 1}.Decide(s, h.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
	})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "first"})
	if _, err := h.Store.AppendWrites(context.Background(), stale...); err == nil {
		t.Fatal("a second claim on slot a was appended from a stale view")
	}
}

func TestRebuildEqualsIncrementalAndSurvivesRestart(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{MinSize: 0}, "a", "b.lan", "c")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 3, RequestedBy: "ca"})
	var claims []string
	h.Read(func(s *projections.State) {
		for _, c := range s.LiveClaims("g") {
			claims = append(claims, c.Name)
		}
	})
	h.MustExec(decide.BootClaim{Claim: claims[0]})
	h.MustExec(decide.MarkReady{Claim: claims[0], Node: "a"})
	h.MustExec(decide.BootClaim{Claim: claims[1]})
	h.Clock.Step(13 * time.Minute)
	h.MustExec(decide.ExpireDeadline{Claim: claims[1]})
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	if err := h.Views.SnapshotNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.MustExec(decide.DecreaseTargetSize{Group: "g", Delta: -1, RequestedBy: "ca"})

	live := h.Canonical()
	if rebuilt := h.Rebuilt(); !bytes.Equal(live, rebuilt) {
		t.Fatalf("rebuild from zero differs from the incremental views:\n%s", decidetest.Diff(string(rebuilt), string(live)))
	}
	lastBefore := h.Views.Seq()
	h.Restart()
	if h.Views.Seq() != lastBefore {
		t.Fatalf("after restart the views are at seq %d, before %d", h.Views.Seq(), lastBefore)
	}
	if after := h.Canonical(); !bytes.Equal(live, after) {
		t.Fatalf("views after restart (snapshot + tail) differ:\n%s", decidetest.Diff(string(live), string(after)))
	}
	// And the restarted pool still takes decisions with the right expectations.
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
}
