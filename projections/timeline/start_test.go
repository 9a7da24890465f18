package timeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// appendLifecycles appends n whole claim lifecycles on slots (declared
// first when declare is set), one event a minute from at, to a real log.
func appendLifecycles(t *testing.T, st *eventlog.Store, at time.Time, slots, n int, declare bool, tag string) time.Time {
	t.Helper()
	ctx := context.Background()
	pub := eventstest.NewBoundedPublisher(st.JetStream(), 0)
	count := 0
	emit := func(d events.Data) {
		at = at.Add(time.Minute)
		m, err := eventlog.ToMsg(events.Event{ID: fmt.Sprintf("%s-%d", tag, count), Time: at, Data: d}, st.Subjects().Subject(events.AggregateOf(d), d.EventType()))
		if err != nil {
			t.Fatal(err)
		}
		count++
		if err := pub.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if declare {
		emit(events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}})
		for s := range slots {
			slot := fmt.Sprintf("node-%d.lan", s)
			emit(events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + slot}})
		}
	}
	for i := range n {
		slot := fmt.Sprintf("node-%d.lan", i%slots)
		r := events.Ref{Claim: fmt.Sprintf("%s-%s-%d", slot, tag, i), Slot: slot, Group: "g", Attempt: 1, Cause: "test"}
		for _, d := range scaledDownLifecycle(r, slot, at) {
			emit(d)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return at
}

// startViews starts views over st with snapshots in bucket, a timeline
// index registered when index is set; log takes the runner's lines.
func startViews(t *testing.T, st *eventlog.Store, bucket string, index bool, log *slog.Logger) (*projections.Runner, *Index) {
	t.Helper()
	ctx := context.Background()
	snaps, err := projections.OpenSnapshots(ctx, st.JetStream(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	views := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: log})
	var idx *Index
	if index {
		if idx, err = NewIndex(ctx, views, st, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return views, idx
}

var builtLine = regexp.MustCompile(`msg="views built" seq=(\d+) events=(\d+)`)

// foldedAtStart is how many events the views' start folded, by its line.
func foldedAtStart(t *testing.T, logs string) uint64 {
	t.Helper()
	m := builtLine.FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no 'views built' line: %s", logs)
	}
	n, _ := strconv.ParseUint(m[2], 10, 64)
	return n
}

// sameAsTheLog checks idx cuts [since, until) as a fold of the log does.
func sameAsTheLog(t *testing.T, st *eventlog.Store, idx *Index, since, until time.Time) {
	t.Helper()
	ctx := context.Background()
	got, err := idx.Timeline(ctx, since, until, until)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Build(ctx, st, nil, since, until, until)
	if err != nil {
		t.Fatal(err)
	}
	// Seq is the last event each folded: the index's is the log's.
	got.Seq, want.Seq = 0, 0
	if g, w := barsOf(got), barsOf(want); g != w {
		t.Fatalf("window %s-%s from the index:\n%s\nfolded from the log:\n%s", since, until, g, w)
	}
	if len(got.Bars) == 0 {
		t.Fatal("the window has no intervals")
	}
}

// A start restores the index from its part of the views' snapshot and
// folds only the events after it, once, for the views and the index: the
// index then cuts windows before the snapshot and after it as a fold of
// the log does.
func TestTimelineIndexStartsFromTheViewsSnapshot(t *testing.T) {
	ctx := context.Background()
	st, _ := eventstest.NewStore(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mid := appendLifecycles(t, st, start, 4, 20, true, "old")
	views, _ := startViews(t, st, "TIMELINE_TEST_SNAPS", true, nil)
	if err := views.SnapshotNow(ctx); err != nil {
		t.Fatal(err)
	}
	last := appendLifecycles(t, st, mid, 4, 5, false, "new")

	var logs bytes.Buffer
	_, idx := startViews(t, st, "TIMELINE_TEST_SNAPS", true, slog.New(slog.NewTextHandler(&logs, nil)))
	if n := foldedAtStart(t, logs.String()); n != 5*7 {
		t.Fatalf("the start folded %d events, want the 35 after the snapshot: %s", n, logs.String())
	}
	sameAsTheLog(t, st, idx, start, mid)
	sameAsTheLog(t, st, idx, mid.Add(-time.Hour), last)
}

// A snapshot without the index's part (written before the index was
// registered): the start folds the whole log, for the views and the
// index alike, rather than leave the index without its history.
func TestTimelineIndexWithoutItsPartFoldsTheLogFromItsStart(t *testing.T) {
	ctx := context.Background()
	st, _ := eventstest.NewStore(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mid := appendLifecycles(t, st, start, 4, 10, true, "a")
	views, _ := startViews(t, st, "TIMELINE_TEST_SNAPS", false, nil)
	if err := views.SnapshotNow(ctx); err != nil {
		t.Fatal(err)
	}
	last := appendLifecycles(t, st, mid, 4, 2, false, "b")
	b, err := st.Bounds(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	_, idx := startViews(t, st, "TIMELINE_TEST_SNAPS", true, slog.New(slog.NewTextHandler(&logs, nil)))
	if n := foldedAtStart(t, logs.String()); n != b.Last {
		t.Fatalf("the start folded %d events, want the whole log's %d: %s", n, b.Last, logs.String())
	}
	if !strings.Contains(logs.String(), "folding the log from its start") {
		t.Fatalf("no line says why the whole log was folded: %s", logs.String())
	}
	sameAsTheLog(t, st, idx, start, last)
}

// barsOf prints a timeline's intervals with their names, whatever order
// its tables list the claims in.
func barsOf(tl Timeline) string {
	var b strings.Builder
	fmt.Fprintf(&b, "events %d, seq %d\n", tl.Events, tl.Seq)
	for k := 0; k+4 < len(tl.Bars); k += 5 {
		claim := "-"
		if c := tl.Bars[k+4]; c >= 0 {
			claim = tl.Claims[c]
		}
		fmt.Fprintf(&b, "%s %d-%d %s %s\n", tl.Slots[tl.Bars[k]], tl.Bars[k+1], tl.Bars[k+2], tl.Phases[tl.Bars[k+3]], claim)
	}
	return b.String()
}

// scaledDownLifecycle is one claim of group "g" on slot, asked for by
// cluster-autoscaler at at, from ClaimCreated to ClaimCollected.
func scaledDownLifecycle(r events.Ref, slot string, at time.Time) []events.Data {
	return []events.Data{
		events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"},
			DeadlineAt: at.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)},
		events.ClaimBooting{Ref: r, StartupJob: r.Claim + "-start-1"},
		events.ClaimReady{Ref: r, Node: slot},
		events.ScaleDownRequested{Ref: r, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Group: "g", Nodes: []string{slot}}},
		events.ShutdownFired{Ref: r, Job: r.Claim + "-stop-1", ShutdownAttempt: 1},
		events.ClaimCompleted{Ref: r, Reason: projections.ReasonScaledDown},
		events.ClaimCollected{Ref: r},
	}
}
