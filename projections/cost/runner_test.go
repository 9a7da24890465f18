package cost

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// While the views, and the index with them, are built, a report is
// refused at once with how far the fold is; once built, it is answered.
func TestReportWhileTheIndexIsBuilt(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx := context.Background()
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
	x, err := NewRunner(ctx, views, st, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	since, until := t0.Add(-24*time.Hour), t0.Add(24*time.Hour)
	_, err = x.Report(ctx, ByGroup, since, until)
	var building *BuildingError
	if !errors.As(err, &building) || !strings.Contains(err.Error(), "cost index is being built") {
		t.Fatalf("before the views' start: %v", err)
	}
	if _, built := x.SlotTotals(t0); built {
		t.Fatal("slot totals before the views were built")
	}
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := x.Report(ctx, ByGroup, since, until)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Key != "g" || rep.Rows[0].Currency != "EUR" || rep.Rows[0].MachineHours != 3 {
		t.Fatalf("built: %+v", rep.Rows)
	}
}

// The cost counters' figures (SlotTotals): none until the views are
// built; over a log with missing sequences, what the log
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
	x, err := NewRunner(ctx, views, st, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	totals, built := x.SlotTotals(t0.Add(24 * time.Hour))
	if !built {
		t.Fatal("no slot totals once the views were built")
	}
	if len(totals) != 1 || totals[0].Slot != "s" || totals[0].Group != "g" || totals[0].UpSeconds != 3600 || totals[0].Cost != 2 || totals[0].Currency != "EUR" {
		t.Fatalf("slot totals over the damaged log: %+v", totals)
	}
	_, err = x.Report(ctx, "group", t0.Add(-time.Hour), t0.Add(2*time.Hour))
	var damaged *DamagedLogError
	if !errors.As(err, &damaged) || !strings.Contains(err.Error(), "sequence 5 is missing") {
		t.Fatalf("report over the damaged log: %v", err)
	}
}

// declarePricedGroup appends group g, priced 1 EUR an hour.
func declarePricedGroup(t *testing.T, st *eventlog.Store, at time.Time) {
	t.Helper()
	price := 1.0
	if _, err := st.Append(context.Background(), events.GroupAggregate("g"), 0, events.Event{Time: at, Data: events.GroupDeclared{
		Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Cost: &events.Cost{PricePerHour: &price, Currency: "EUR"}},
	}}); err != nil {
		t.Fatal(err)
	}
}
