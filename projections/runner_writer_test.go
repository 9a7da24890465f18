package projections_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// A follower folds the log but writes no snapshot: only the replica whose
// Writer says so (the leader) does, from the moment it does.
func TestOnlyTheWriterTakesSnapshots(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps, err := projections.OpenSnapshots(ctx, st.JetStream(), "")
	if err != nil {
		t.Fatal(err)
	}
	var leads atomic.Bool
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, SnapshotEvery: 5, Logger: quietLog(), Writer: leads.Load})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	declareSlots(t, st, 11) // 12 events
	if err := r.WaitFor(ctx, 12); err != nil {
		t.Fatal(err)
	}
	if s, err := snaps.Load(ctx); err != nil || s != nil {
		t.Fatalf("a follower wrote a snapshot: %v %v", s, err)
	}
	leads.Store(true)
	if _, err := st.Append(ctx, events.SlotAggregate("extra"), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: "extra", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://extra"}}}); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		s, err := snaps.Load(ctx)
		if err != nil {
			return err
		}
		if s == nil {
			return errors.New("the leader wrote no snapshot yet")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
