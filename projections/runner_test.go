package projections_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

func declareSlots(t *testing.T, st *eventlog.Store, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Append(ctx, events.GroupAggregate("g"), 0, events.Event{Time: t0, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("s%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunnerWritesSnapshotsPeriodically(t *testing.T) {
	st, srv := eventstest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps, err := projections.OpenSnapshots(ctx, st.JetStream(), "")
	if err != nil {
		t.Fatal(err)
	}
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, SnapshotEvery: 5, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	declareSlots(t, st, 11) // 12 events
	if err := r.WaitFor(ctx, 12); err != nil {
		t.Fatal(err)
	}
	// Bounded, not slept: on a loaded machine a snapshot read can take a
	// while; the test only needs it to land.
	eventstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		s, err := snaps.Load(ctx)
		if err != nil {
			return err
		}
		if s == nil || s.Seq < 10 {
			return errors.New("no snapshot at seq >= 10 yet")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = srv
}

func TestRunnerIgnoresASnapshotAheadOfTheLog(t *testing.T) {
	// A snapshot from another (longer) log in the same bucket must not be
	// taken for this one's views.
	st, srv := eventstest.NewStore(t)
	ctx := context.Background()
	snaps, err := projections.OpenSnapshots(ctx, st.JetStream(), "")
	if err != nil {
		t.Fatal(err)
	}
	declareSlots(t, st, 3)
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	want := canonical(t, r)
	declareSlots2 := func() {
		for i := 3; i < 6; i++ {
			name := fmt.Sprintf("s%d", i)
			if _, err := st.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Snapshot a longer history, then start over on a fresh stream.
	declareSlots2()
	r2 := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
	if err := r2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.SnapshotNow(ctx); err != nil {
		t.Fatal(err)
	}
	st2, err := eventlog.OpenStore(ctx, st.JetStream(), eventlog.StoreConfig{Stream: "OTHER", Prefix: "other"})
	if err != nil {
		t.Fatal(err)
	}
	declareSlots(t, st2, 3)
	r3 := projections.NewRunner(st2, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
	if err := r3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := canonical(t, r3); !bytes.Equal(got, want) {
		t.Fatalf("views built on a snapshot ahead of the log:\n%s", got)
	}
	_ = srv
}

func TestSnapshotOfAnotherVersionIsRefused(t *testing.T) {
	if _, err := projections.DecodeSnapshot([]byte(`{"version":999,"seq":1,"state":{}}`)); err == nil {
		t.Fatal("a snapshot of another version was accepted")
	}
	if _, err := projections.DecodeSnapshot([]byte(`{"version":2,"seq":5,"state":{"seq":4}}`)); err == nil {
		t.Fatal("a snapshot whose state disagrees with its seq was accepted")
	}
}

func canonical(t *testing.T, r *projections.Runner) []byte {
	t.Helper()
	var b []byte
	var err error
	r.Read(func(s *projections.State) { b, err = projections.Canonical(s) })
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Readiness under churn: views one event behind the log are current for
// CaughtUpWithin as soon as they fold it within the wait, and not current
// while the fold is held past the wait. (OnEvent runs on the fold's
// goroutine: holding it holds the next event's fold.)
func TestCaughtUpWithinWaitsForTheFoldOfTheLastEvent(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := make(chan struct{})
	held := make(chan uint64, 8)
	// WaitFor's direct-read timer is the clock's only waiter: it says
	// when a caller waits for the fold.
	clk := clocktesting.NewFakeClock(time.Now())
	r := projections.NewRunner(st, projections.RunnerOptions{Clock: clk, OnEvent: func(e events.Event) {
		if e.Seq == 2 {
			held <- e.Seq
			<-hold
		}
	}})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	declareSlots(t, st, 2) // seqs 1 to 3; the fold stops after 2
	<-held
	if ok, last, err := r.CaughtUp(ctx); err != nil || ok || last != 3 {
		t.Fatalf("CaughtUp with seq 3 unfolded = %v at %d, %v; want false at 3", ok, last, err)
	}
	start := time.Now()
	if ok, _, err := r.CaughtUpWithin(ctx, 200*time.Millisecond); err != nil || ok {
		t.Fatalf("CaughtUpWithin while the fold is held = %v, %v; want false", ok, err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("CaughtUpWithin gave up after %v, before its wait", waited)
	}
	type caughtUp struct {
		ok   bool
		last uint64
		err  error
	}
	within := make(chan caughtUp, 1)
	go func() {
		ok, last, err := r.CaughtUpWithin(ctx, 10*time.Second)
		within <- caughtUp{ok, last, err}
	}()
	// The fold goes on once CaughtUpWithin waits for it.
	eventstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if !clk.HasWaiters() {
			return errors.New("CaughtUpWithin does not wait for the fold")
		}
		return nil
	})
	close(hold)
	if got := <-within; got.err != nil || !got.ok || got.last != 3 {
		t.Fatalf("CaughtUpWithin as the fold goes on = %v at %d, %v; want true at 3", got.ok, got.last, got.err)
	}
	if r.Seq() != 3 {
		t.Fatalf("views at %d after CaughtUpWithin, want 3", r.Seq())
	}
}
