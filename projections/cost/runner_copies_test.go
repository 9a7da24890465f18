package cost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/projections"
)

// costLog is a log of a group at 1 EUR/h and a slot whose machine goes on
// and off every hour from t0, in store st.
type costLog struct {
	t       *testing.T
	st      *eventlog.Store
	t0      time.Time
	slotSeq uint64
	on      bool
	hours   int
}

var costLogT0 = time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)

func newCostLog(t *testing.T, st *eventlog.Store) *costLog {
	t.Helper()
	ctx := context.Background()
	declarePricedGroup(t, st, costLogT0)
	res, err := st.Append(ctx, events.SlotAggregate("s"), 0, events.Event{Time: costLogT0, Data: events.SlotDeclared{Ref: events.Ref{Slot: "s", Group: "g", Cause: "test"}}})
	if err != nil {
		t.Fatal(err)
	}
	return &costLog{t: t, st: st, t0: costLogT0, slotSeq: res.Last}
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

// power appends n power facts, an hour apart.
func (l *costLog) power(n int) {
	l.t.Helper()
	ref := events.Ref{Slot: "s", Group: "g", Cause: "test"}
	for range n {
		at := l.t0.Add(time.Duration(l.hours) * time.Hour)
		var d events.Data = events.MachinePoweredOn{Ref: ref, Node: "s", At: at, AtSource: events.AtObserved}
		if l.on {
			d = events.MachinePoweredOff{Ref: ref, Node: "s", At: at, AtSource: events.AtObserved, Reason: events.PowerOffNotReady}
		}
		res, err := l.st.Append(context.Background(), events.SlotAggregate("s"), l.slotSeq, events.Event{Time: at, Data: d})
		if err != nil {
			l.t.Fatal(err)
		}
		l.slotSeq, l.on = res.Last, !l.on
		l.hours++
	}
}

func openCostCopies(t *testing.T, st *eventlog.Store) *projections.Checkpoints {
	t.Helper()
	cps, err := projections.OpenCheckpoints(context.Background(), st.JetStream(), "COST_COPIES_TEST", 1)
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

// copyObjects is openCostCopies' bucket as the object store it is: the
// tests plant, damage and remove copies in it as a disk or a restore would.
func copyObjects(t *testing.T, st *eventlog.Store) jetstream.ObjectStore {
	t.Helper()
	obj, err := st.JetStream().ObjectStore(context.Background(), "COST_COPIES_TEST")
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func copyNames(t *testing.T, st *eventlog.Store) []string {
	t.Helper()
	objs, err := copyObjects(t, st).List(context.Background())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		if strings.HasPrefix(o.Name, costCopyPrefix) {
			names = append(names, o.Name)
		}
	}
	return names
}

// machineHours is the group's machine-hours over the whole log, by x.
func machineHours(t *testing.T, x *Runner) float64 {
	t.Helper()
	r, err := x.Report(context.Background(), ByGroup, costLogT0.Add(-time.Hour), costLogT0.AddDate(0, 0, 30))
	if err != nil {
		t.Fatal(err)
	}
	var h float64
	for _, row := range r.Rows {
		h += row.MachineHours
	}
	return h
}

// The index saves a copy every `every` events and keeps the newest two; a
// new index starts from the newest copy, reads only the events after it,
// and reports what a fold of the whole log reports.
func TestCostIndexContinuesFromItsSavedCopy(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx := context.Background()
	cps := openCostCopies(t, st)
	l := newCostLog(t, st)

	x := NewRunner(st, nil)
	x.KeepCopies(cps, projections.CopyOptions{Every: 4})
	for range 4 {
		l.power(4)
		if err := x.catchUp(ctx); err != nil {
			t.Fatal(err)
		}
		x.saveCopyIfDue(ctx, false)
	}
	// Copies at 6, 10, 14, 18: the newest two stay.
	if got := strings.Join(copyNames(t, st), " "); got != costCopyName(14)+" "+costCopyName(18) {
		t.Fatalf("copies kept: %s", got)
	}
	l.power(2) // 20 events, the machine on 9 hours; the newest copy covers 18

	var logs logcapture.Buffer
	y := NewRunner(st, slog.New(slog.NewTextHandler(&logs, nil)))
	y.KeepCopies(cps, projections.CopyOptions{Every: 4})
	if got, want := machineHours(t, y), machineHours(t, NewRunner(st, nil)); got != want || got != 9 {
		t.Fatalf("from the copy: %v machine-hours, from the log %v (want 9)", got, want)
	}
	if out := logs.String(); !strings.Contains(out, `msg="cost index loaded from its saved copy" copy=`+costCopyName(18)) || !strings.Contains(out, "from_copy=18") {
		t.Fatalf("start log:\n%s", out)
	}

	// Proof it read only the events after the copy: a copy of an empty
	// index said to cover seq 18 makes the index lack the first 18 events.
	if _, err := copyObjects(t, st).PutBytes(ctx, costCopyName(18), NewIndex().MarshalIndex(18)); err != nil {
		t.Fatal(err)
	}
	z := NewRunner(st, nil)
	z.KeepCopies(cps, projections.CopyOptions{Every: 4})
	if got := machineHours(t, z); got != 1 {
		t.Fatalf("from an empty copy at 18: %v machine-hours, want the 1 of events 19 and 20", got)
	}
}

// A damaged copy, and a copy ahead of the log (a restore of an older
// backup), are reported in words and passed over: the index is built from
// the log (or an older good copy) and reports the same.
func TestCostIndexPassesOverDamagedAndForeignCopies(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx := context.Background()
	cps := openCostCopies(t, st)
	l := newCostLog(t, st)
	l.power(6) // 8 events
	x := NewRunner(st, nil)
	if err := x.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	good := x.idx.Load().MarshalIndex(8)
	damaged := bytes.Clone(good)
	damaged[len(damaged)/2] ^= 1
	for name, b := range map[string][]byte{costCopyName(8): damaged, costCopyName(50): good} {
		if _, err := copyObjects(t, st).PutBytes(ctx, name, b); err != nil {
			t.Fatal(err)
		}
	}
	var logs logcapture.Buffer
	y := NewRunner(st, slog.New(slog.NewTextHandler(&logs, nil)))
	y.KeepCopies(cps, projections.CopyOptions{Every: 4})
	if got := machineHours(t, y); got != 3 {
		t.Fatalf("past bad copies: %v machine-hours, want 3", got)
	}
	out := logs.String()
	for _, want := range []string{
		fmt.Sprintf("cost index copy %s is damaged (checksum mismatch); trying an older copy or the log", costCopyName(8)),
		fmt.Sprintf("cost index copy %s is ahead of the event log, which ends at seq 8", costCopyName(50)),
		"from_copy=0",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
	// The next save prunes the copy ahead of the log and the damaged one.
	l.power(5)
	if err := y.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	y.saveCopyIfDue(ctx, false)
	if got := strings.Join(copyNames(t, st), " "); got != costCopyName(8)+" "+costCopyName(13) {
		// The damaged copy at 8 is the older of the two kept; it is passed
		// over again should the newest be lost.
		t.Fatalf("copies after a save: %s", got)
	}
}

// A log whose first events expired is reported on when a saved copy
// covers them (no 410), and refused (410) when the copy ends before them.
func TestCostIndexCopyCoversAnExpiredLogStart(t *testing.T) {
	srv := eventstest.StartServer(t)
	ctx := context.Background()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{MaxAge: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cps := openCostCopies(t, st)
	l := newCostLog(t, st)
	l.power(1) // 3 events: the machine on since t0
	x := NewRunner(st, nil)
	x.KeepCopies(cps, projections.CopyOptions{Every: 1})
	if err := x.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	x.saveCopyIfDue(ctx, false)
	early := NewIndex().MarshalIndex(1)
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := st.Bounds(ctx)
		if err != nil || b.First < 4 {
			return fmt.Errorf("log starts at %d (%v)", b.First, err)
		}
		return nil
	})
	l.power(1) // seq 4: off an hour after t0

	y := NewRunner(st, nil)
	y.KeepCopies(cps, projections.CopyOptions{Every: 1})
	if got := machineHours(t, y); got != 1 {
		t.Fatalf("over the expired start covered by the copy: %v machine-hours, want 1", got)
	}

	// Only a copy that ends before the log's first event: refused.
	if err := copyObjects(t, st).Delete(ctx, costCopyName(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := copyObjects(t, st).PutBytes(ctx, costCopyName(1), early); err != nil {
		t.Fatal(err)
	}
	z := NewRunner(st, nil)
	z.KeepCopies(cps, projections.CopyOptions{Every: 1})
	_, err = z.Report(ctx, ByGroup, costLogT0, costLogT0.Add(time.Hour))
	if _, ok := err.(*ExpiredLogError); !ok || !strings.Contains(err.Error(), "starts at seq 4") {
		t.Fatalf("with a copy that ends before the log's start: %v, want the 410 error", err)
	}
}

// Run saves a copy at a clean shutdown of what it folded since the last.
func TestCostIndexSavesACopyAtShutdown(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	cps := openCostCopies(t, st)
	l := newCostLog(t, st)
	l.power(3) // 5 events
	ctx, cancel := context.WithCancel(context.Background())
	views := projections.NewRunner(st, projections.RunnerOptions{})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	x := NewRunner(st, nil)
	x.KeepCopies(cps, projections.CopyOptions{Every: 1000})
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx, views) }()
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if _, built := x.SlotTotals(costLogT0); !built {
			return fmt.Errorf("not built")
		}
		return nil
	})
	if names := copyNames(t, st); len(names) != 0 {
		t.Fatalf("copies before 1000 events: %v", names)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(copyNames(t, st), " "); got != costCopyName(5) {
		t.Fatalf("copies after shutdown: %s", got)
	}
}
