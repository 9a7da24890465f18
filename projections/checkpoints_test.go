package projections_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// retentionStore opens the log on srv with a MaxAge of maxAge (0: forever).
func retentionStore(t *testing.T, srv *eventstest.Server, maxAge time.Duration) (*eventlog.Store, *projections.Checkpoints, *projections.Snapshots) {
	t.Helper()
	ctx := context.Background()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{MaxAge: maxAge})
	if err != nil {
		t.Fatal(err)
	}
	cps, err := projections.OpenCheckpoints(ctx, js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := projections.OpenSnapshots(ctx, js, "")
	if err != nil {
		t.Fatal(err)
	}
	return st, cps, snaps
}

func appendData(t *testing.T, st *eventlog.Store, at time.Time, d events.Data) uint64 {
	t.Helper()
	res, err := st.Append(context.Background(), events.AggregateOf(d), 0, events.Event{Time: at, Data: d})
	if err == nil {
		return res.Last
	}
	// Later events of an aggregate: the test does not decide, it records.
	res, err = st.AppendWrites(context.Background(), events.Write{Aggregate: events.AggregateOf(d), Expected: lastOf(t, st, events.AggregateOf(d)), Events: []events.Event{{Time: at, Data: d}}})
	if err != nil {
		t.Fatalf("append %s: %v", d.EventType(), err)
	}
	return res.Last
}

func lastOf(t *testing.T, st *eventlog.Store, agg events.Aggregate) uint64 {
	t.Helper()
	var last uint64
	if err := st.ReadAggregate(context.Background(), agg, func(e events.Event) error {
		last = e.Seq
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return last
}

// alwaysOnClaim is a ready claim of slot a: created, booting, ready.
func alwaysOnClaim(t *testing.T, st *eventlog.Store, at time.Time) {
	t.Helper()
	r := events.Ref{Claim: "a-000001", Slot: "a", Group: "g", Attempt: 1, Cause: "minSize"}
	appendData(t, st, at, events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}})
	appendData(t, st, at, events.SlotDeclared{Ref: events.Ref{Slot: "a", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://a"}})
	appendData(t, st, at, events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: "test", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"}, DeadlineAt: at.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)})
	appendData(t, st, at, events.ClaimBooting{Ref: r, StartupJob: r.Claim + "-start-1"})
	appendData(t, st, at, events.ClaimReady{Ref: r, Node: "a"})
}

func canonicalState(t *testing.T, st *projections.State) string {
	t.Helper()
	b, err := projections.Canonical(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitExpired(t *testing.T, st *eventlog.Store, first uint64) {
	t.Helper()
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := st.Bounds(context.Background())
		if err != nil {
			return err
		}
		if b.First < first {
			return fmt.Errorf("log still starts at seq %d", b.First)
		}
		return nil
	})
}

// An always-on claim older than the retention: after its events expire and
// the snapshot is gone, the views start from the checkpoint the runner took
// on its own, the claim is still ready and its later moves are folded.
func TestRetentionRebuildStartsFromACheckpoint(t *testing.T) {
	srv := eventstest.StartServer(t)
	const maxAge = 2 * time.Second
	st, cps, snaps := retentionStore(t, srv, maxAge)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	alwaysOnClaim(t, st, time.Now().UTC())
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Checkpoints: cps, CheckpointPolicy: projections.CheckpointPolicy{Every: 3}, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	// An event after Start: the schedule (no checkpoint yet) takes one.
	appendData(t, st, time.Now().UTC(), events.SlotDeclared{Ref: events.Ref{Slot: "b", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://b"}})
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if r.CheckpointSeq() < 6 {
			return fmt.Errorf("checkpoint at seq %d, want 6", r.CheckpointSeq())
		}
		return nil
	})
	var live string
	r.Read(func(s *projections.State) { live = canonicalState(t, s) })
	if err := r.SnapshotNow(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	waitExpired(t, st, 7)
	// A restart without the latest snapshot (a fresh replica).
	js, _ := jetstream.New(srv.Conn)
	obj, err := js.ObjectStore(context.Background(), "claimstream-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	if err := obj.Delete(context.Background(), "views"); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	st, cps, snaps = retentionStore(t, srv, maxAge)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	r2 := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Checkpoints: cps, Logger: quietLog()})
	if err := r2.Start(ctx2); err != nil {
		t.Fatal(err)
	}
	var c *projections.Claim
	var rebuilt string
	r2.Read(func(s *projections.State) {
		c = s.Claims["a-000001"]
		rebuilt = canonicalState(t, s)
	})
	if c == nil || c.Phase != projections.PhaseReady {
		t.Fatalf("always-on claim after expiry: %+v, want ready", c)
	}
	if rebuilt != live {
		t.Fatalf("views rebuilt from the checkpoint differ from the live ones")
	}
	replayed, err := projections.ReplayTo(ctx2, st, cps, 6)
	if err != nil {
		t.Fatal(err)
	}
	if canonicalState(t, replayed) != live {
		t.Fatal("replay from the checkpoint differs from the live views")
	}

	// A later move of the claim is folded, not refused.
	go func() { done <- r2.Run(ctx2) }()
	seq := appendData(t, st, time.Now().UTC(), events.ClaimCompleted{Ref: events.Ref{Claim: "a-000001", Slot: "a", Group: "g", Attempt: 1, Cause: "test"}, Reason: projections.ReasonScaledDown})
	if err := r2.WaitFor(ctx2, seq); err != nil {
		t.Fatal(err)
	}
	r2.Read(func(s *projections.State) { c = s.Claims["a-000001"] })
	if c == nil || c.Phase != projections.PhaseCompleted || r2.Refused() != 0 {
		t.Fatalf("later move after expiry: claim %+v, refused %d", c, r2.Refused())
	}
	if err := r2.WritesRefused(); err != nil {
		t.Fatalf("expiry covered by a checkpoint is not a gap: %v", err)
	}
	cancel2()
	<-done
}

// Without a checkpoint a truncated log is refused at start, naming the
// log's first sequence and the newest checkpoint's.
func TestRetentionRefusesALogPastEveryCheckpoint(t *testing.T) {
	srv := eventstest.StartServer(t)
	st, cps, snaps := retentionStore(t, srv, 2*time.Second)
	ctx := context.Background()
	alwaysOnClaim(t, st, time.Now().UTC())
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Checkpoints: cps, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CheckpointNow(ctx); err != nil { // at seq 5
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // seqs 6-8, never checkpointed
		appendData(t, st, time.Now().UTC(), events.SlotDeclared{Ref: events.Ref{Slot: "s" + strconv.Itoa(i), Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://s" + strconv.Itoa(i)}})
	}
	waitExpired(t, st, 7)
	r2 := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Checkpoints: cps, Logger: quietLog()})
	err := r2.Start(ctx)
	var te *projections.TruncatedLogError
	if !errors.As(err, &te) {
		t.Fatalf("start over a log past every checkpoint: %v, want a TruncatedLogError", err)
	}
	b, _ := st.Bounds(ctx)
	for _, want := range []string{fmt.Sprintf("starts at seq %d", b.First), "newest checkpoint ends at seq 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := projections.ReplayTo(ctx, st, cps, b.Last); !errors.As(err, &te) {
		t.Fatalf("replay over the truncated log: %v, want a TruncatedLogError", err)
	}
	// A snapshot of an older version that reaches the log's end is not
	// used either: the refusal names it.
	js, _ := jetstream.New(srv.Conn)
	obj, err := js.ObjectStore(ctx, "claimstream-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.PutBytes(ctx, "views", []byte(fmt.Sprintf(`{"version":%d,"seq":%d,"state":{"seq":%d}}`, projections.SnapshotVersion-1, b.Last, b.Last))); err != nil {
		t.Fatal(err)
	}
	err = projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Checkpoints: cps, Logger: quietLog()}).Start(ctx)
	if !errors.As(err, &te) || !strings.Contains(err.Error(), fmt.Sprintf("snapshot version %d", projections.SnapshotVersion-1)) {
		t.Fatalf("start over a truncated log with an old snapshot: %v", err)
	}
	// Without checkpoints at all the same holds: no fold of a truncated log.
	r3 := projections.NewRunner(st, projections.RunnerOptions{Logger: quietLog()})
	if err := r3.Start(ctx); !errors.As(err, &te) || te.NewestCheckpoint != 0 {
		t.Fatalf("start without checkpoints over a truncated log: %v", err)
	}
}

// Replay to any instant equals the views the live runner had then, while
// the runner takes checkpoints on its schedule.
func TestReplayAtAnyInstantEqualsTheLiveViews(t *testing.T) {
	srv := eventstest.StartServer(t)
	st, cps, _ := retentionStore(t, srv, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The clock stands a day after the events, so the hourly ones are kept.
	clk := clocktesting.NewFakeClock(t0.Add(24 * time.Hour))
	r := projections.NewRunner(st, projections.RunnerOptions{Checkpoints: cps, CheckpointPolicy: projections.CheckpointPolicy{Every: 7}, Clock: clk, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	type seen struct {
		at     time.Time
		digest [32]byte
	}
	var history []seen
	record := func(seq uint64, at time.Time) {
		if err := r.WaitFor(ctx, seq); err != nil {
			t.Fatal(err)
		}
		r.Read(func(s *projections.State) {
			history = append(history, seen{at: at, digest: sha256.Sum256([]byte(canonicalState(t, s)))})
		})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	at := t0
	next := func(d events.Data) {
		at = at.Add(time.Duration(1+rng.IntN(1800)) * time.Second)
		record(appendData(t, st, at, d), at)
	}
	next(events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}})
	for s := 0; s < 3; s++ {
		name := "s" + strconv.Itoa(s)
		next(events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}})
	}
	for i := 0; i < 12; i++ {
		slot := "s" + strconv.Itoa(i%3)
		r := events.Ref{Claim: fmt.Sprintf("%s-%06x", slot, i), Slot: slot, Group: "g", Attempt: 1, Cause: "test"}
		next(events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: "test", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"}, DeadlineAt: at.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)})
		next(events.ClaimBooting{Ref: r, StartupJob: r.Claim + "-start-1"})
		next(events.ClaimReady{Ref: r, Node: slot})
		next(events.ClaimCompleted{Ref: r, Reason: projections.ReasonScaledDown})
	}
	// The runner looks at the schedule once per batch it folds, so where the
	// checkpoints fall depends on how the events were batched; once it has
	// folded the last one, the newest is less than Every events behind it.
	last := uint64(len(history))
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if got := r.CheckpointSeq(); got+7 <= last {
			return fmt.Errorf("newest checkpoint at seq %d, %d events behind the last", got, last-got)
		}
		return nil
	})
	list, err := cps.List(ctx)
	if err != nil || len(list) < 3 {
		t.Fatalf("checkpoints %v (%v): want several", list, err)
	}
	for i := 0; i < 40; i++ {
		k := rng.IntN(len(history))
		instant := history[k].at
		if k+1 < len(history) && rng.IntN(2) == 0 {
			// Between two events: the earlier one's views.
			instant = instant.Add(history[k+1].at.Sub(instant) / 2)
		}
		got, err := projections.ReplayUntil(ctx, st, cps, instant)
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256([]byte(canonicalState(t, got))) != history[k].digest {
			t.Fatalf("replay at %s (seq %d) differs from the live views then", instant, k+1)
		}
		bySeq, err := projections.ReplayTo(ctx, st, cps, uint64(k+1))
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256([]byte(canonicalState(t, bySeq))) != history[k].digest {
			t.Fatalf("replay to seq %d differs from the live views then", k+1)
		}
	}
	cancel()
	<-done
}

// The interval timer takes a checkpoint when events came since the last
// one and none is due by count.
func TestCheckpointIntervalOnTheClock(t *testing.T) {
	srv := eventstest.StartServer(t)
	st, cps, _ := retentionStore(t, srv, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clocktesting.NewFakeClock(t0)
	r := projections.NewRunner(st, projections.RunnerOptions{Checkpoints: cps, CheckpointPolicy: projections.CheckpointPolicy{Every: 1000, Interval: time.Hour}, Clock: clk, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	declareSlots(t, st, 0) // seq 1: the first checkpoint is due at once
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if r.CheckpointSeq() != 1 {
			return fmt.Errorf("checkpoint at %d, want 1", r.CheckpointSeq())
		}
		return nil
	})
	appendData(t, st, t0, events.SlotDeclared{Ref: events.Ref{Slot: "b", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://b"}})
	if err := r.WaitFor(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := r.CheckpointSeq(); got != 1 {
		t.Fatalf("checkpoint at %d before the interval passed", got)
	}
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if !clk.HasWaiters() {
			return errors.New("the checkpoint timer is not armed")
		}
		return nil
	})
	clk.Step(time.Hour)
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if r.CheckpointSeq() != 2 {
			return fmt.Errorf("checkpoint at %d, want 2", r.CheckpointSeq())
		}
		return nil
	})
	cancel()
	<-done
}

func TestCheckpointPolicyIsDue(t *testing.T) {
	p := projections.CheckpointPolicy{Every: 100, Interval: time.Hour}
	clk := clocktesting.NewFakePassiveClock(t0)
	newest := projections.CheckpointInfo{Seq: 50, Time: t0}
	cases := []struct {
		name string
		seq  uint64
		step time.Duration
		want bool
	}{
		{"no new event", 50, 2 * time.Hour, false},
		{"few events, soon", 60, time.Minute, false},
		{"enough events", 150, time.Minute, true},
		{"few events, an hour on", 51, time.Hour, true},
	}
	for _, c := range cases {
		now := clk.Now().Add(c.step)
		if got := p.CheckpointDue(newest, t0, c.seq, now); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
	if !p.CheckpointDue(projections.CheckpointInfo{}, time.Time{}, 1, t0) {
		t.Error("first checkpoint not due")
	}
}

func TestCheckpointPolicyPrunes(t *testing.T) {
	p := projections.CheckpointPolicy{Retention: 30 * 24 * time.Hour, HourlyFor: 7 * 24 * time.Hour}
	now := t0.Add(60 * 24 * time.Hour)
	var cps []projections.CheckpointInfo
	// One every 20 minutes for 60 days.
	seq := uint64(0)
	for at := t0; !at.After(now); at = at.Add(20 * time.Minute) {
		seq += 10
		cps = append(cps, projections.CheckpointInfo{Seq: seq, Time: at})
	}
	drop := map[uint64]bool{}
	for _, s := range p.Prune(cps, now) {
		drop[s] = true
	}
	hours, days := map[string]int{}, map[string]int{}
	for _, cp := range cps {
		if drop[cp.Seq] {
			continue
		}
		age := now.Sub(cp.Time)
		switch {
		case age > p.Retention:
			t.Errorf("checkpoint %d of %s kept past the retention", cp.Seq, cp.Time)
		case age > p.HourlyFor:
			days[cp.Time.Format(time.DateOnly)]++
		default:
			hours[cp.Time.Truncate(time.Hour).String()]++
		}
	}
	if drop[cps[len(cps)-1].Seq] {
		t.Error("the newest checkpoint was pruned")
	}
	for h, n := range hours {
		if n != 1 {
			t.Errorf("hour %s keeps %d checkpoints", h, n)
		}
	}
	if len(hours) < 7*24 || len(days) < 22 {
		t.Errorf("kept %d hourly, %d daily checkpoints", len(hours), len(days))
	}
	for d, n := range days {
		if n != 1 {
			t.Errorf("day %s keeps %d checkpoints", d, n)
		}
	}
	// Forever: no daily checkpoint is dropped for its age.
	p.Retention = 0
	if n := len(cps) - len(p.Prune(cps, now)); n < 7*24+53 {
		t.Errorf("forever keeps %d checkpoints, want one a day back to the first", n)
	}
}

// A checkpoint bucket that fails is tried again a minute later, not at
// every event.
func TestCheckpointFailureWaitsBeforeTheNextTry(t *testing.T) {
	srv := eventstest.StartServer(t)
	st, cps, _ := retentionStore(t, srv, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js, _ := jetstream.New(srv.Conn)
	if err := js.DeleteObjectStore(ctx, "claimstream-checkpoints"); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	r := projections.NewRunner(st, projections.RunnerOptions{Checkpoints: cps, CheckpointPolicy: projections.CheckpointPolicy{Every: 1}, Clock: clk, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	failures := func(want uint64) {
		t.Helper()
		eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			if got := r.CheckpointFailures(); got != want {
				return fmt.Errorf("%d checkpoint failures, want %d", got, want)
			}
			return nil
		})
	}
	declareSlots(t, st, 0)
	failures(1)
	declareSlots2 := func(name string) {
		seq := appendData(t, st, t0, events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}})
		if err := r.WaitFor(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	declareSlots2("b")
	declareSlots2("c")
	if got := r.CheckpointFailures(); got != 1 {
		t.Fatalf("%d checkpoint failures within the minute, want 1", got)
	}
	clk.Step(time.Minute)
	declareSlots2("d")
	failures(2)
	cancel()
	<-done
}
