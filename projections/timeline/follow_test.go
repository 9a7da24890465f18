package timeline

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// followingIndex runs a views runner and a timeline index over st's log,
// as serve does, until the test ends; it returns once the index follows
// the runner.
func followingIndex(t *testing.T, st *eventlog.Store, log *slog.Logger) (*Index, *projections.Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	views := projections.NewRunner(st, projections.RunnerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	idx := NewIndex(st, nil, log)
	done := make(chan struct{}, 2)
	go func() { _ = views.Run(ctx); done <- struct{}{} }()
	go func() { _ = idx.Run(ctx, views); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	waitFollowing(t, idx)
	return idx, views
}

func waitFollowing(t *testing.T, idx *Index) {
	t.Helper()
	eventstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		idx.mu.Lock()
		defer idx.mu.Unlock()
		if !idx.following() {
			return errors.New("the index does not follow the views yet")
		}
		return nil
	})
}

// appendFailedClaim appends a claim on slot that fails to boot.
func appendFailedClaim(t *testing.T, st *eventlog.Store, at time.Time, slot, claim string) time.Time {
	t.Helper()
	r := events.Ref{Claim: claim, Slot: slot, Group: "g", Attempt: 1, Cause: "test"}
	for _, d := range []events.Data{
		events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"},
			DeadlineAt: at.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)},
		events.ClaimBooting{Ref: r, StartupJob: claim + "-start-1"},
		events.ClaimFailed{Ref: r, Reason: "boot-timeout"},
	} {
		at = at.Add(time.Minute)
		m, err := eventlog.ToMsg(events.Event{ID: claim + "-" + string(d.EventType()), Time: at, Data: d}, st.Subjects().Subject(events.AggregateOf(d), d.EventType()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.JetStream().PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	return at
}

// sameAsTheLogFold checks windows of the last hours against a fold of the
// log: intervals, failures and event counts.
func sameAsTheLogFold(t *testing.T, st *eventlog.Store, idx *Index, last time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, span := range []time.Duration{20 * time.Minute, 2 * time.Hour, 30 * time.Hour} {
		since, until := last.Add(-span), last.Add(time.Minute)
		got, err := idx.Timeline(ctx, since, until, until)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Build(ctx, st, nil, since, until, until)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := barsOf(got), barsOf(want); g != w {
			t.Fatalf("window of %v from the index:\n%s\nfolded from the log:\n%s", span, g, w)
		}
		if got.Events != want.Events || len(got.Failures) != len(want.Failures) || got.Seq != want.Seq {
			t.Fatalf("window of %v: index %d events, %d failure fields, seq %d; log fold %d, %d, %d", span, got.Events, len(got.Failures), got.Seq, want.Events, len(want.Failures), want.Seq)
		}
	}
}

// Once built, the index follows the views' runner and holds no views of
// its own, and what it then takes from the runner answers every window
// as a fold of the log does: phases, claims, failures and counts.
func TestTimelineIndexFollowsTheViewsWithoutViewsOfItsOwn(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := appendLifecycles(t, st, start, 4, 12, true, "before")
	idx, views := followingIndex(t, st, nil)

	// Events the index only learns from the runner.
	last = appendLifecycles(t, st, last, 4, 6, false, "after")
	last = appendFailedClaim(t, st, last, "node-2.lan", "node-2.lan-failed")
	last = appendLifecycles(t, st, last, 4, 2, false, "later")
	b, err := st.Bounds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := views.WaitFor(context.Background(), b.Last); err != nil {
		t.Fatal(err)
	}
	sameAsTheLogFold(t, st, idx, last)
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if idx.st != nil || idx.seq != b.Last {
		t.Fatalf("the index holds views of its own (%v) at seq %d, want none at the log's last, %d", idx.st != nil, idx.seq, b.Last)
	}
	if fails := idx.slots["node-2.lan"].fails; len(fails) != 1 || fails[0].reason != "boot-timeout" {
		t.Fatalf("node-2.lan's failures %+v, want the boot timeout", fails)
	}
}

// An index that lost its place in the runner's records (the runner
// installed other views, or the records overflowed) says so once, builds
// again from the log, follows again, and still answers as the log fold.
func TestTimelineIndexBuildsAgainWhenItLosesItsPlaceInTheViews(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := appendLifecycles(t, st, start, 3, 6, true, "before")
	var logs bytes.Buffer
	idx, views := followingIndex(t, st, slog.New(slog.NewTextHandler(&logs, nil)))

	// The records begin again, as when the runner installs views.
	views.Read(func(s *projections.State) { idx.feed.publish(s, nil) })
	last = appendLifecycles(t, st, last, 3, 4, false, "after")
	b, err := st.Bounds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := views.WaitFor(context.Background(), b.Last); err != nil {
		t.Fatal(err)
	}
	sameAsTheLogFold(t, st, idx, last)
	waitFollowing(t, idx)
	if n := strings.Count(logs.String(), "lost its place"); n != 1 {
		t.Fatalf("want one line saying the index lost its place, got %d:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), `msg="timeline index built"`); n != 2 {
		t.Fatalf("want the index built twice, got %d:\n%s", n, logs.String())
	}
}

// Records past the bound begin again instead of piling up.
func TestTimelineFeedIsBounded(t *testing.T) {
	f := &timelineFeed{}
	st := projections.NewState()
	f.publish(st, nil)
	e := events.Event{Seq: 1, Time: time.Now(), Data: events.GroupDeclared{Ref: events.Ref{Group: "g"}}}
	for i := range maxFeedRecords + 1 {
		e.Seq = uint64(i + 1)
		st.Seq = e.Seq
		f.publish(st, &e)
	}
	if len(f.records) != 0 || f.epoch != 2 || f.base != maxFeedRecords+1 {
		t.Fatalf("after %d records: %d held, epoch %d, base %d; want none held, epoch 2, base %d", maxFeedRecords+1, len(f.records), f.epoch, f.base, maxFeedRecords+1)
	}
}
