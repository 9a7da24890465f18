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

// checkpoint saves the views of the whole log as a checkpoint.
func checkpoint(t *testing.T, st *eventlog.Store, cps *projections.Checkpoints, last time.Time) projections.CheckpointInfo {
	t.Helper()
	ctx := context.Background()
	b, err := st.Bounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	views, err := projections.ReplayTo(ctx, st, nil, b.Last)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := cps.Save(ctx, views, last)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Seq != b.Last {
		t.Fatalf("checkpoint at seq %d, want the log's last, %d", cp.Seq, b.Last)
	}
	return cp
}

var foldedLine = regexp.MustCompile(`msg="timeline index built" from_seq=(\d+) events_folded=(\d+)`)

// A long log with checkpoints: the index starts from the newest checkpoint
// older than any window it answers, not from the log's start, and cuts the
// same recent windows as folding them from the log does.
func TestTimelineIndexStartsFromACheckpointBeforeAnyWindow(t *testing.T) {
	ctx := context.Background()
	st, _ := eventstest.NewStore(t)
	cps, err := projections.OpenCheckpoints(ctx, st.JetStream(), "TIMELINE_TEST_CHECKPOINTS", 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := appendLifecycles(t, st, start, 4, 40, true, "old")
	old := checkpoint(t, st, cps, last)
	// Forty days later: more claims, and a checkpoint at their end.
	last = appendLifecycles(t, st, start.Add(40*24*time.Hour), 4, 8, false, "new")
	checkpoint(t, st, cps, last)
	last = appendLifecycles(t, st, last, 4, 2, false, "newest")
	b, err := st.Bounds(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	idx := NewIndex(st, cps, slog.New(slog.NewTextHandler(&logs, nil)))
	since, until := last.Add(-3*time.Hour), last
	got, err := idx.Timeline(ctx, since, until, until)
	if err != nil {
		t.Fatal(err)
	}
	m := foldedLine.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no 'timeline index built' line: %s", logs.String())
	}
	from, _ := strconv.ParseUint(m[1], 10, 64)
	folded, _ := strconv.ParseUint(m[2], 10, 64)
	if from != old.Seq+1 || folded != b.Last-old.Seq {
		t.Errorf("the index folded %d events from seq %d, want the %d after the checkpoint at seq %d (the log holds %d)", folded, from, b.Last-old.Seq, old.Seq, b.Last)
	}
	want, err := Build(ctx, st, cps, since, until, until)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := barsOf(got), barsOf(want); g != w {
		t.Fatalf("recent window from the index:\n%s\nfolded from the log:\n%s", g, w)
	}
	if len(got.Bars) == 0 {
		t.Fatal("the recent window has no intervals")
	}
}

// Without a checkpoint old enough, the index folds the log from its start.
func TestTimelineIndexFoldsFromTheStartWithoutAnOldCheckpoint(t *testing.T) {
	ctx := context.Background()
	st, _ := eventstest.NewStore(t)
	cps, err := projections.OpenCheckpoints(ctx, st.JetStream(), "TIMELINE_TEST_CHECKPOINTS", 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := appendLifecycles(t, st, start, 4, 10, true, "a")
	checkpoint(t, st, cps, last) // within a window of the newest events
	last = appendLifecycles(t, st, last, 4, 2, false, "b")
	var logs bytes.Buffer
	idx := NewIndex(st, cps, slog.New(slog.NewTextHandler(&logs, nil)))
	if _, err := idx.Timeline(ctx, last.Add(-time.Hour), last, last); err != nil {
		t.Fatal(err)
	}
	b, err := st.Bounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m := foldedLine.FindStringSubmatch(logs.String()); m == nil || m[1] != "1" || m[2] != strconv.FormatUint(b.Last, 10) {
		t.Fatalf("want the whole log (%d events) folded from seq 1: %s", b.Last, logs.String())
	}
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
