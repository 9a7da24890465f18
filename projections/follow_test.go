package projections_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// followedModel is a read model that records what Follow asks of it: each
// catch-up (the log's last seq it saw), each save, each change of streak.
type followedModel struct {
	store  *eventlog.Store
	copies *projections.IndexCopies
	broken atomic.Bool
	// caught gets the seq each catch-up saw.
	caught chan uint64

	mu    sync.Mutex
	calls []string
	fed   []uint64
	seq   uint64
}

func (m *followedModel) record(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, s)
}

func (m *followedModel) follower() projections.Follower {
	return projections.Follower{
		CatchUp: func(ctx context.Context) error {
			last, err := m.store.LastSeq(ctx)
			if err != nil {
				return err
			}
			defer func() { m.caught <- last }()
			if m.broken.Load() {
				m.record(fmt.Sprintf("catch-up %d failing", last))
				return errors.New("broken")
			}
			m.mu.Lock()
			m.seq = last
			m.mu.Unlock()
			m.record(fmt.Sprintf("catch-up %d", last))
			return nil
		},
		Fed: func(e events.Event) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.fed = append(m.fed, e.Seq)
		},
		Copies: m.copies,
		SaveCopy: func(ctx context.Context, force bool) {
			if !force {
				m.record("save")
				return
			}
			m.record("save forced")
			m.mu.Lock()
			seq := m.seq
			m.mu.Unlock()
			if ctx.Err() == nil && m.copies.Due(seq, true) {
				m.copies.Save(ctx, seq, "", []byte(strconv.FormatUint(seq, 10)))
			}
		},
		Failing:   func(error) { m.record("failing") },
		Recovered: func() { m.record("recovered") },
	}
}

// waitCaught waits for the catch-up that saw the log end at seq.
func (m *followedModel) waitCaught(t *testing.T, seq uint64) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-m.caught:
			if got >= seq {
				return
			}
		case <-timeout:
			t.Fatalf("no catch-up saw seq %d in 30s", seq)
		}
	}
}

func appendSlot(t *testing.T, st *eventlog.Store, name string) uint64 {
	t.Helper()
	res, err := st.Append(context.Background(), events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Last
}

// Follow builds the model at once, catches up after each event the views
// fold (handing each over as it is folded), saves a copy only after a
// catch-up that succeeded, reports a failing streak once and its end
// once, and saves a forced copy as it ends, after ctx ended.
func TestFollowCatchesUpAfterEachFoldAndSavesACopyAsItEnds(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	declareSlots(t, st, 2) // seqs 1-3, before the views start
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Error(err)
		}
	}()
	cps, err := projections.OpenCheckpoints(ctx, st.JetStream(), "FOLLOW_TEST", 1)
	if err != nil {
		t.Fatal(err)
	}
	m := &followedModel{
		store:  st,
		copies: projections.NewIndexCopies("test index", "test-", "Claimstream-Test-Event-Id", cps, projections.CopyOptions{Every: 1_000_000}, quietLog()),
		caught: make(chan uint64, 64),
	}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- projections.Follow(fctx, r, m.follower()) }()

	m.waitCaught(t, 3) // built at once, without an event to wake it
	m.broken.Store(true)
	m.waitCaught(t, appendSlot(t, st, "s2"))
	m.waitCaught(t, appendSlot(t, st, "s3"))
	m.broken.Store(false)
	last := appendSlot(t, st, "s4")
	m.waitCaught(t, last)
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Follow did not end in 30s after its ctx")
	}

	want := []string{
		"catch-up 3", "save",
		"catch-up 4 failing", "failing",
		"catch-up 5 failing",
		"catch-up 6", "save", "recovered",
		"save forced",
	}
	m.mu.Lock()
	calls, fed := m.calls, m.fed
	m.mu.Unlock()
	if !slices.Equal(calls, want) {
		t.Fatalf("Follow asked\n%q\nwant\n%q", calls, want)
	}
	if !slices.Equal(fed, []uint64{4, 5, 6}) {
		t.Fatalf("events handed over: %v, want the seqs folded after Follow began, 4 to 6", fed)
	}
	in, ok := m.copies.Load(ctx, st, last, 0, func(in projections.SavedCopy, raw []byte) error {
		if string(raw) != strconv.FormatUint(in.Seq, 10) {
			return fmt.Errorf("holds %q", raw)
		}
		return nil
	}, errors.New("damaged"))
	if !ok || in.Seq != last {
		t.Fatalf("copy after Follow ended: %+v (found: %v), want one at seq %d", in, ok, last)
	}
}

// With no views, Follow builds the model once and waits for ctx.
func TestFollowWithoutViewsBuildsOnce(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	declareSlots(t, st, 1)
	m := &followedModel{store: st, caught: make(chan uint64, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- projections.Follow(ctx, nil, m.follower()) }()
	m.waitCaught(t, 2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// No copies: the save after the build runs, none is forced at the end.
	if want := []string{"catch-up 2", "save"}; !slices.Equal(m.calls, want) {
		t.Fatalf("Follow asked %q, want %q", m.calls, want)
	}
}
