package cost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// While Run's first fold of the log is under way, a report is refused at
// once (it does not wait for the fold) with how far the fold is; once
// built, the report is answered.
func TestReportWhileTheIndexIsBuilt(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	declarePricedGroup(t, st, t0)
	ref := events.Ref{Slot: "s", Group: "g", Cause: "test"}
	if _, err := st.Append(ctx, events.SlotAggregate("s"), 0,
		events.Event{Time: t0, Data: events.SlotDeclared{Ref: ref}},
		events.Event{Time: t0, Data: events.MachinePoweredOn{Ref: ref, Node: "s", At: t0, AtSource: events.AtObserved}},
		events.Event{Time: t0.Add(3 * time.Hour), Data: events.MachinePoweredOff{Ref: ref, Node: "s", At: t0.Add(3 * time.Hour), AtSource: events.AtObserved, Reason: events.PowerOffNotReady}},
	); err != nil {
		t.Fatal(err)
	}
	views := projections.NewRunner(st, projections.RunnerOptions{})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	x := NewRunner(st, nil)
	since, until := t0.Add(-24*time.Hour), t0.Add(24*time.Hour)

	// A fold under way: Run started, its first pass 1 event of 4 in
	// (held here, where a long log would hold it for seconds).
	x.running.Store(true)
	x.catchMu.Lock()
	x.seq.Store(1)
	x.target.Store(4)
	_, err := x.Report(ctx, ByGroup, since, until)
	var building *BuildingError
	if !errors.As(err, &building) || !strings.Contains(err.Error(), "cost index is being built") || !strings.Contains(err.Error(), "1 of 4 events folded, 25%") {
		t.Fatalf("while building: %v", err)
	}
	x.seq.Store(0)
	x.catchMu.Unlock()

	done := make(chan error, 1)
	go func() { done <- x.Run(ctx, views) }()
	t.Cleanup(func() { cancel(); <-done })
	var rep Report
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		rep, err = x.Report(ctx, ByGroup, since, until)
		return err
	})
	if len(rep.Rows) != 1 || rep.Rows[0].Key != "g" || rep.Rows[0].Currency != "EUR" || rep.Rows[0].MachineHours != 3 {
		t.Fatalf("built: %+v", rep.Rows)
	}
}

// The cost counters' figures (SlotTotals): none until Run's first fold
// reached the log's end; over a log with missing sequences, what the log
// holds, while its reports are refused (412).
func TestCostIndexTotalsOverADamagedLog(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx := context.Background()
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	p := func(v float64) *float64 { return &v }
	if _, err := st.Append(ctx, events.GroupAggregate("g"), 0, events.Event{Time: t0, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Cost: &events.Cost{PricePerHour: p(2), Currency: "EUR"}}}}); err != nil {
		t.Fatal(err)
	}
	ref := events.Ref{Slot: "s", Group: "g", Cause: "test"}
	if _, err := st.Append(ctx, events.SlotAggregate("s"), 0,
		events.Event{Time: t0, Data: events.SlotDeclared{Ref: ref}},
		events.Event{Time: t0, Data: events.MachinePoweredOn{Ref: ref, Node: "s", At: t0, AtSource: events.AtObserved}},
		events.Event{Time: t0.Add(time.Hour), Data: events.MachinePoweredOff{Ref: ref, Node: "s", At: t0.Add(time.Hour), AtSource: events.AtObserved, Reason: events.PowerOffNotReady}},
	); err != nil {
		t.Fatal(err)
	}
	// The last event, lost with the end of its block: sequence 5 is missing.
	if _, err := st.Append(ctx, events.SlotAggregate("lost"), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: "lost", Group: "g", Cause: "test"}}}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.TruncateBlock("CLAIMSTREAM", 100)
	srv.Start()
	st = srv.Store()
	views := projections.NewRunner(st, projections.RunnerOptions{AcceptGaps: true})
	runCtx, cancel := context.WithCancel(ctx)
	if err := views.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	x := NewRunner(st, nil)
	if _, built := x.SlotTotals(t0); built {
		t.Fatal("slot totals before the index was built")
	}
	done := make(chan error, 1)
	go func() { done <- x.Run(runCtx, views) }()
	t.Cleanup(func() { cancel(); <-done })
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if _, built := x.SlotTotals(t0); !built {
			return fmt.Errorf("not built")
		}
		return nil
	})
	totals, _ := x.SlotTotals(t0.Add(24 * time.Hour))
	if len(totals) != 1 || totals[0].Slot != "s" || totals[0].Group != "g" || totals[0].UpSeconds != 3600 || totals[0].Cost != 2 || totals[0].Currency != "EUR" {
		t.Fatalf("slot totals over the damaged log: %+v", totals)
	}
	_, err := x.Report(ctx, "group", t0.Add(-time.Hour), t0.Add(2*time.Hour))
	var damaged *DamagedLogError
	if !errors.As(err, &damaged) || !strings.Contains(err.Error(), "sequence 5 is missing") {
		t.Fatalf("report over the damaged log: %v", err)
	}
}
