package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
)

// A group of 20 slots whose log lost the declaration of slot s-7 (40
// flipped bytes in its record, seq 9).
func logMissingASlot(t *testing.T) (*eventlog.Store, *eventstest.Server) {
	t.Helper()
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx := context.Background()
	now := handlerstest.Start
	if _, err := st.Append(ctx, events.GroupAggregate("g"), 0, events.Event{Time: now, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler, MaxSize: 20}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		name := fmt.Sprintf("s-%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: now, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}}); err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop()
	srv.FlipBlockBytes("CLAIMSTREAM", []byte("cs.slot.s-7.SlotDeclared"), 40)
	srv.Start()
	return srv.Store(), srv
}

func serviceOver(t *testing.T, st *eventlog.Store, accept bool) *handlers.Service {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	views := projections.NewRunner(st, projections.RunnerOptions{AcceptGaps: accept, Logger: rquiet})
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := views.Start(sctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- views.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return handlers.NewService(st, views, clocktesting.NewFakeClock(handlerstest.Start), "/test", rquiet)
}

func TestWritesAreRefusedOverAGapInTheLog(t *testing.T) {
	st, _ := logMissingASlot(t)
	svc := serviceOver(t, st, false)
	before, err := st.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"})
	if decide.CodeOf(err) != decide.CodeFailedPrecondition {
		t.Fatalf("want a FailedPrecondition refusal, got %v", err)
	}
	for _, want := range []string{"sequence 9 is missing from the log", "--accept-log-gaps", "writes refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q does not say %q", err, want)
		}
	}
	if after, _ := st.LastSeq(context.Background()); after != before {
		t.Fatalf("a refused command wrote: log at %d, was %d", after, before)
	}
}

func TestWritesOverAGapGoOnWhenAccepted(t *testing.T) {
	st, _ := logMissingASlot(t)
	svc := serviceOver(t, st, true)
	res, err := svc.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"})
	if err != nil {
		t.Fatalf("gaps accepted, yet: %v", err)
	}
	// The claim (22), and on the group the call's SizeIncreased and
	// ScaleRequested (23, 24).
	if len(res.Claims()) != 1 || res.Last != 24 {
		t.Fatalf("wrote %v at %d", res.Claims(), res.Last)
	}
}
