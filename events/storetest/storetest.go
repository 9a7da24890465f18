// Package storetest is the behaviour suite of the event store: what every
// deployment of it (one server, a three-node cluster) must do the same.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// Backend is one deployment of the store under test.
type Backend struct {
	// NewStore opens a fresh, empty store (its own stream).
	NewStore func(t *testing.T) *eventlog.Store
	// ChangeLeader moves the leadership of the store's stream to another
	// server and returns once it has a new leader. Nil on a single server,
	// which has no leader to change.
	ChangeLeader func(t *testing.T, st *eventlog.Store)
}

// Run runs every behaviour of the suite as a subtest.
func Run(t *testing.T, b Backend) {
	t.Run("ExpectationConflict", func(t *testing.T) { expectationConflict(t, b) })
	t.Run("ConcurrentSameExpectation", func(t *testing.T) { concurrentSameExpectation(t, b) })
	t.Run("RetriedAppendDedupes", func(t *testing.T) { retriedAppendDedupes(t, b) })
	t.Run("BatchAllOrNothing", func(t *testing.T) { batchAllOrNothing(t, b) })
	t.Run("LastSeq", func(t *testing.T) { lastSeq(t, b) })
	t.Run("ReadsAcrossLeaderChange", func(t *testing.T) { readsAcrossLeaderChange(t, b) })
}

// Created and Booting are a claim's first two events on slot.
var Created, Booting = eventstest.Created, eventstest.Booting

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func readAll(t *testing.T, st *eventlog.Store) []events.Event {
	t.Helper()
	var out []events.Event
	if err := st.Read(ctxFor(t), 1, 0, func(e events.Event) error { out = append(out, e); return nil }); err != nil {
		t.Fatalf("read: %v", err)
	}
	return out
}

// A stale expectation is a *ConflictError, whatever code the server gave.
func expectationConflict(t *testing.T, b Backend) {
	st := b.NewStore(t)
	ctx := ctxFor(t)
	slot := events.SlotAggregate("node-1")
	if _, err := st.Append(ctx, slot, 0, Created("node-1", "c1")); err != nil {
		t.Fatalf("first append: %v", err)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("node-2"), 0, Created("node-2", "c2")); err != nil {
		t.Fatalf("another aggregate: %v", err)
	}
	if _, err := st.Append(ctx, slot, 1, Booting("node-1", "c1")); err != nil {
		t.Fatalf("append expecting 1: %v", err)
	}
	_, err := st.Append(ctx, slot, 1, Created("node-1", "c3"))
	var ce *eventlog.ConflictError
	if !errors.Is(err, eventlog.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("stale append: %v, want a conflict", err)
	}
	if ce.Code != 10071 && ce.Code != 10164 || ce.Aggregate != slot || ce.Expected != 1 {
		t.Fatalf("conflict %+v", ce)
	}
	if _, err := st.Append(ctx, slot, 0, Created("node-1", "c4")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("append expecting an empty aggregate: %v, want a conflict", err)
	}
	if n := len(readAll(t, st)); n != 3 {
		t.Fatalf("log holds %d events, want 3", n)
	}
}

// Writers racing on one aggregate with the same expectation: exactly one
// lands; every other gets ErrConflict (10071 once the winner is applied,
// 10164 on a cluster while it is still being proposed), never another error.
func concurrentSameExpectation(t *testing.T, b Backend) {
	st := b.NewStore(t)
	ctx := ctxFor(t)
	slot := events.SlotAggregate("race")
	if _, err := st.Append(ctx, slot, 0, Created("race", "c0")); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var mu sync.Mutex
	codes := map[int]int{}
	won := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := st.Append(ctx, slot, 1, Booting("race", "c0"))
			mu.Lock()
			defer mu.Unlock()
			var ce *eventlog.ConflictError
			switch {
			case err == nil:
				won++
			case errors.As(err, &ce) && errors.Is(err, eventlog.ErrConflict):
				codes[ce.Code]++
			default:
				t.Errorf("writer: %v, want success or a conflict", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d writers landed, want 1 (conflicts by code: %v)", won, codes)
	}
	for code := range codes {
		if code != 10071 && code != 10164 {
			t.Fatalf("conflict code %d", code)
		}
	}
	t.Logf("conflicts by JetStream code: %v", codes)
	if n := len(readAll(t, st)); n != 2 {
		t.Fatalf("log holds %d events, want 2", n)
	}
}

// An append retried with the same events (its ack lost) stores nothing new,
// also when the retry goes to the stream's new leader.
func retriedAppendDedupes(t *testing.T, b Backend) {
	st := b.NewStore(t)
	ctx := ctxFor(t)
	slot := events.SlotAggregate("node-1")
	evs := []events.Event{Created("node-1", "c1")}
	r1, err := st.Append(ctx, slot, 0, evs...)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := st.Append(ctx, slot, 0, evs...)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !r2.Duplicate || r2.Last != r1.Last || r2.Events[0].ID != r1.Events[0].ID {
		t.Fatalf("retry %+v, want a duplicate of seq %d", r2, r1.Last)
	}
	// A batch retried after its ack was lost: recognised by its ids.
	batch := []events.Write{
		{Aggregate: events.SlotAggregate("a"), Expected: 0, Events: []events.Event{Created("a", "a1"), Booting("a", "a1")}},
		{Aggregate: events.SlotAggregate("b"), Expected: 0, Events: []events.Event{Created("b", "b1")}},
	}
	rb, err := st.AppendWrites(ctx, batch...)
	if err != nil {
		t.Fatal(err)
	}
	if b.ChangeLeader != nil {
		b.ChangeLeader(t, st)
	}
	again, err := st.AppendWrites(ctx, batch...)
	if err != nil {
		t.Fatalf("retried batch: %v", err)
	}
	if !again.Duplicate || again.Last != rb.Last || again.First != rb.First {
		t.Fatalf("retried batch %+v, want the first try's %d..%d", again, rb.First, rb.Last)
	}
	if b.ChangeLeader != nil {
		r3, err := st.Append(ctx, slot, 0, evs...)
		if err != nil || !r3.Duplicate || r3.Last != r1.Last {
			t.Fatalf("retry on the new leader: %+v, %v", r3, err)
		}
	}
	if n := len(readAll(t, st)); n != 4 {
		t.Fatalf("log holds %d events, want 4", n)
	}
}

// A batch lands whole or not at all.
func batchAllOrNothing(t *testing.T, b Backend) {
	st := b.NewStore(t)
	ctx := ctxFor(t)
	a, bb := events.SlotAggregate("a"), events.SlotAggregate("b")
	if _, err := st.Append(ctx, bb, 0, Created("b", "b1")); err != nil {
		t.Fatal(err)
	}
	_, err := st.AppendWrites(ctx,
		events.Write{Aggregate: a, Expected: 0, Events: []events.Event{Created("a", "a1")}},
		events.Write{Aggregate: bb, Expected: 0, Events: []events.Event{Created("b", "b2")}},
	)
	if !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("stale batch: %v, want a conflict", err)
	}
	if n := len(readAll(t, st)); n != 1 {
		t.Fatalf("after the refused batch the log holds %d, want 1", n)
	}
	res, err := st.AppendWrites(ctx,
		events.Write{Aggregate: a, Expected: 0, Events: []events.Event{Created("a", "a1"), Booting("a", "a1")}},
		events.Write{Aggregate: bb, Expected: 1, Events: []events.Event{Booting("b", "b1")}},
	)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if res.First != 2 || res.Last != 4 {
		t.Fatalf("batch landed at %d..%d, want 2..4", res.First, res.Last)
	}
	all := readAll(t, st)
	if len(all) != 4 || all[1].Type != events.TypeClaimCreated || all[2].Type != events.TypeClaimBooting || all[3].Aggregate != bb {
		t.Fatalf("log after the batch: %+v", all)
	}
}

func lastSeq(t *testing.T, b Backend) {
	st := b.NewStore(t)
	ctx := ctxFor(t)
	if n, err := st.LastSeq(ctx); err != nil || n != 0 {
		t.Fatalf("LastSeq of an empty log = %d, %v", n, err)
	}
	for i := 0; i < 5; i++ {
		slot := fmt.Sprintf("s%d", i)
		res, err := st.Append(ctx, events.SlotAggregate(slot), 0, Created(slot, "c"))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := st.LastSeq(ctx); err != nil || n != res.Last {
			t.Fatalf("LastSeq = %d, %v after an append at %d", n, err, res.Last)
		}
	}
}

// Read, Get, LastSeq and a running Tail go on across a change of the
// stream's leader, and nothing is lost or repeated.
func readsAcrossLeaderChange(t *testing.T, b Backend) {
	st := b.NewStore(t)
	ctx := ctxFor(t)
	appendN := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			slot := fmt.Sprintf("s%d", i)
			if _, err := st.Append(ctx, events.SlotAggregate(slot), 0, Created(slot, "c")); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
	}
	appendN(0, 10)
	var mu sync.Mutex
	var tailed []uint64
	tctx, stopTail := context.WithCancel(ctx)
	tailDone := make(chan error, 1)
	go func() {
		tailDone <- st.Tail(tctx, 1, func(e events.Event) error {
			mu.Lock()
			defer mu.Unlock()
			tailed = append(tailed, e.Seq)
			return nil
		})
	}()
	if b.ChangeLeader != nil {
		b.ChangeLeader(t, st)
	}
	appendN(10, 10)
	if b.ChangeLeader != nil {
		b.ChangeLeader(t, st)
	}
	if n, err := st.LastSeq(ctx); err != nil || n != 20 {
		t.Fatalf("LastSeq after the leader changed = %d, %v; want 20", n, err)
	}
	if e, err := st.Get(ctx, 15); err != nil || e.Seq != 15 || e.Err != nil {
		t.Fatalf("Get(15) after the leader changed: %+v, %v", e, err)
	}
	all := readAll(t, st)
	if len(all) != 20 || all[0].Seq != 1 || all[19].Seq != 20 {
		t.Fatalf("Read after the leader changed got %d events", len(all))
	}
	appendN(20, 5)
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(tailed) < 25 {
			return fmt.Errorf("the tail has %d of 25 events", len(tailed))
		}
		return nil
	})
	stopTail()
	if err := <-tailDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("tail: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, seq := range tailed {
		if seq != uint64(i+1) {
			t.Fatalf("the tail got %v, want 1..25 in order, once each", tailed)
		}
	}
}
