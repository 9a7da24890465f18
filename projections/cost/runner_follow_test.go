package cost

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// Once built, the cost index follows the views' runner: new events reach
// its totals without a read of the log (no consumer is created for them),
// and a report still covers every event appended before it.
func TestCostIndexFollowsTheViewsWithoutReadingTheLog(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	declarePricedGroup(t, st, t0)
	views := projections.NewRunner(st, projections.RunnerOptions{})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	viewsDone := make(chan error, 1)
	go func() { viewsDone <- views.Run(ctx) }()
	x := NewRunner(st, nil)
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx, views) }()
	t.Cleanup(func() { cancel(); <-done; <-viewsDone })
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if _, built := x.SlotTotals(t0); !built {
			return fmt.Errorf("not built")
		}
		return nil
	})

	// Every consumer the stream gets from now on.
	var created atomic.Int32
	sub, err := srv.Conn.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.CREATED."+st.Stream()+".*", func(*nats.Msg) { created.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := srv.Conn.Flush(); err != nil {
		t.Fatal(err)
	}

	const slots = 10
	for i := range slots {
		slot := fmt.Sprintf("s%d", i)
		ref := events.Ref{Slot: slot, Group: "g", Cause: "test"}
		if _, err := st.Append(ctx, events.SlotAggregate(slot), 0,
			events.Event{Time: t0, Data: events.SlotDeclared{Ref: ref}},
			events.Event{Time: t0, Data: events.MachinePoweredOn{Ref: ref, Node: slot, At: t0, AtSource: events.AtObserved}},
			events.Event{Time: t0.Add(time.Hour), Data: events.MachinePoweredOff{Ref: ref, Node: slot, At: t0.Add(time.Hour), AtSource: events.AtObserved, Reason: events.PowerOffNotReady}},
		); err != nil {
			t.Fatal(err)
		}
	}
	last, err := st.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if got := x.seq.Load(); got != last {
			return fmt.Errorf("the index folded up to seq %d of %d", got, last)
		}
		return nil
	})
	totals, _ := x.SlotTotals(t0.Add(24 * time.Hour))
	if len(totals) != slots {
		t.Fatalf("slot totals: %+v, want %d slots", totals, slots)
	}
	rep, err := x.Report(ctx, "group", t0.Add(-time.Hour), t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Cost != slots {
		t.Fatalf("report: %+v, want one group costing %d", rep.Rows, slots)
	}
	if err := srv.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := created.Load(); n != 0 {
		t.Fatalf("the index read the log %d times to follow it", n)
	}
}
