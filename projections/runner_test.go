package projections_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

func declareSlots(t *testing.T, st *events.Store, n int) {
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
	st2, err := events.OpenStore(ctx, st.JetStream(), events.StoreConfig{Stream: "OTHER", Prefix: "other"})
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
