package projections_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/projections"
)

// deleteConsumers deletes every consumer of the store's stream: the views'
// reader fails as it would when its consumer is lost.
func deleteConsumers(t *testing.T, st *eventlog.Store) int {
	t.Helper()
	ctx := context.Background()
	s, err := st.JetStream().Stream(ctx, st.Stream())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	names := s.ConsumerNames(ctx)
	for name := range names.Name() {
		if err := s.DeleteConsumer(ctx, name); err != nil {
			t.Fatalf("delete consumer %s: %v", name, err)
		}
		n++
	}
	return n
}

// A consumer error no longer ends the views: the runner says it is behind
// (CaughtUp false, the reason in Problem), waits its backoff on its clock,
// re-creates the reader from the last folded event, and folds on. One
// warning per incident.
func TestRunnerRecreatesItsReaderAfterAConsumerError(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clocktesting.NewFakeClock(t0)
	logs := &logcapture.Buffer{}
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: clk})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	declareSlots(t, st, 2)
	if err := r.WaitFor(ctx, 3); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if deleteConsumers(t, st) == 0 {
			return errors.New("the views' consumer is not there yet")
		}
		return nil
	})
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !r.ReaderStatus().Down {
			return errors.New("the reader is not down")
		}
		return nil
	})
	select {
	case err := <-done:
		t.Fatalf("Run ended after a consumer error: %v", err)
	default:
	}
	// Behind while down: readiness says so.
	if ok, _, err := r.CaughtUp(ctx); err != nil || ok {
		t.Fatalf("CaughtUp while the reader is down = %v, %v", ok, err)
	}
	if p, _ := r.Problem(); !strings.Contains(p, "reader of the log stopped") {
		t.Fatalf("problem %q does not say the reader stopped", p)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("late"), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: "late", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://late"}}}); err != nil {
		t.Fatal(err)
	}
	// The backoff runs on the runner's clock.
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !r.ReaderStatus().Down {
			return nil
		}
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		return errors.New("the reader is still down")
	})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := r.WaitFor(wctx, 4); err != nil {
		t.Fatalf("the event appended while the reader was down: %v", err)
	}
	if ok, _, err := r.CaughtUp(ctx); err != nil || !ok {
		t.Fatalf("CaughtUp after the reader resumed = %v, %v", ok, err)
	}
	if rs := r.ReaderStatus(); rs.Restarts != 1 {
		t.Fatalf("reader status %+v, want one restart", rs)
	}
	if n := logs.Count("views' reader of the log stopped"); n != 1 {
		t.Fatalf("the incident was logged %d times, want once", n)
	}
	if n := logs.Count("views' reader of the log resumed"); n != 1 {
		t.Fatalf("the recovery was logged %d times, want once", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// On a cluster the views fold on across changes of the stream's leader,
// whichever server they read through.
func TestRunnerFollowsTheLogAcrossStreamLeaderChanges(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	writer := c.Store(0, eventlog.StoreConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader := c.Store(1, eventlog.StoreConfig{})
	r := projections.NewRunner(reader, projections.RunnerOptions{Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	declareSlots(t, writer, 3)
	for i := 0; i < 3; i++ {
		c.StepDownStream(writer.Stream())
		name := fmt.Sprintf("after-%d", i)
		if _, err := writer.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := r.WaitFor(wctx, 7); err != nil {
		t.Fatalf("views after three leader changes: %v (at %d)", err, r.Seq())
	}
	want, err := projections.Rebuild(ctx, writer, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got *projections.State
	r.Read(func(s *projections.State) { got = s })
	if got.Seq != want.Seq || len(got.Slots) != len(want.Slots) {
		t.Fatalf("views at %d with %d slots, rebuild at %d with %d", got.Seq, len(got.Slots), want.Seq, len(want.Slots))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
