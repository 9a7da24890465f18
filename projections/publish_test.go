package projections_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// A publisher sees the views at registration, again when Start installs
// the built views, and after every fold before anyone WaitFor released
// learns of it: a copy it publishes is never behind the views.
func TestPublishRunsBeforeTheFoldIsVisible(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	declareSlots(t, st, 2) // seqs 1..3, folded by Start
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: quietLog()})
	var published atomic.Uint64 // the seq of the views the publisher last saw
	var whole, folds atomic.Int64
	stop := r.Publish(func(s *projections.State, e *events.Event) {
		if e == nil {
			whole.Add(1)
		} else {
			folds.Add(1)
			if e.Seq != s.Seq {
				t.Errorf("published event %d with the views at %d", e.Seq, s.Seq)
			}
		}
		published.Store(s.Seq)
	})
	if whole.Load() != 1 || published.Load() != 0 {
		t.Fatalf("at registration: %d calls, seq %d; want one call with the empty views", whole.Load(), published.Load())
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if whole.Load() != 2 || published.Load() != 3 {
		t.Fatalf("after Start: %d whole-views calls at seq %d, want 2 at seq 3", whole.Load(), published.Load())
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	groupSeq := uint64(1)
	for seq := uint64(4); seq <= 6; seq++ {
		ref := events.Ref{Group: "g", Cause: "test"}
		spec := events.GroupSpec{MinSize: int(seq), Scaler: events.ScalerClusterAutoscaler}
		if _, err := st.Append(ctx, events.GroupAggregate("g"), groupSeq, events.Event{Time: t0, Data: events.GroupChanged{Ref: ref, Spec: spec}}); err != nil {
			t.Fatal(err)
		}
		groupSeq = seq
		if err := r.WaitFor(ctx, seq); err != nil {
			t.Fatal(err)
		}
		if got := published.Load(); got < seq {
			t.Fatalf("WaitFor(%d) returned with the publisher at seq %d", seq, got)
		}
	}
	if folds.Load() != 3 {
		t.Errorf("%d folds published, want 3", folds.Load())
	}
	stop()
	cancel()
	<-done
}
