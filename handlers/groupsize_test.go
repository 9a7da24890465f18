package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/decide/decidetest"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
)

// maxSize holds across processes: two writers that judged the same group
// state (4 live of maxSize 5) on different free slots cannot both land,
// because each carries the group's expectation.
func TestTwoWritersOnOneGroupStateCannotJointlyPassMaxSize(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{MaxSize: 5}, handlerstest.Slots("s", 8)...)
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 4, RequestedBy: "ca"})
	var increase, manual []events.Write
	h.Read(func(s *projections.State) {
		var err error
		if increase, err = (decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"}).Decide(s, h.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		if manual, err = (decide.ManualClaim{Slot: "s-7", By: "alice"}).Decide(s, h.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	if _, err := h.Store.AppendWrites(ctx, increase...); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.AppendWrites(ctx, manual...); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("the second writer's claim landed over maxSize: %v", err)
	}
}

// Two command services on one log, with their own group locks and views
// (two replicas), racing IncreaseSize and manual claims on other slots
// never take a group past maxSize.
func TestTwoServicesRacingIncreaseSizeNeverExceedMaxSize(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{MaxSize: 5}, handlerstest.Slots("s", 12)...)
	other := h.Replica("/claimstream/b")
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range 24 {
		svc := h.Service
		var cmd decide.Command = decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"}
		if i%2 == 1 {
			svc = other.Service
			cmd = decide.ManualClaim{Slot: fmt.Sprintf("s-%d", 11-i/2), By: "alice"}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svc.Execute(context.Background(), cmd)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				created += len(res.Claims())
			} else if decide.CodeOf(err) != decide.CodeFailedPrecondition {
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	last, err := h.Store.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Views.WaitFor(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	h.Read(func(s *projections.State) {
		if live := s.LiveInService("g"); live != 5 || created != 5 {
			t.Fatalf("%d live claims, %d created; maxSize 5", live, created)
		}
		if err := decidetest.CheckInvariants(s); err != nil {
			t.Fatal(err)
		}
	})
}
