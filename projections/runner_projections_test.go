package projections_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// seqSum is a projection that adds up the sequences of the events it
// folds: over a whole log of n events, n(n+1)/2. Its part is the sum in
// decimal; applied (not saved) counts the events it was handed since its
// restore.
type seqSum struct {
	name string
	mu   sync.Mutex
	sum  uint64
	// begun: the Restore's seq; noHistory: restored without a part past
	// the log's start.
	begun     uint64
	noHistory bool
	applied   int
}

func (p *seqSum) Name() string { return p.name }

func (p *seqSum) Restore(st *projections.State, part projections.Part) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sum, p.begun, p.noHistory, p.applied = 0, st.Seq, false, 0
	if part == nil {
		p.noHistory = st.Seq > 0
		return nil
	}
	b, err := io.ReadAll(part)
	if err != nil {
		p.noHistory = st.Seq > 0
		return fmt.Errorf("seq sum: %w", err)
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		p.noHistory = st.Seq > 0
		return fmt.Errorf("seq sum: %w", err)
	}
	p.sum = n
	return nil
}

func (p *seqSum) Apply(_ *projections.State, e events.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sum += e.Seq
	p.applied++
}

func (p *seqSum) WritePart(w io.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := io.WriteString(w, strconv.FormatUint(p.sum, 10))
	return err
}

func (p *seqSum) state() (sum uint64, applied int, noHistory bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sum, p.applied, p.noHistory
}

// declareNamedSlots appends n slot declarations (one event each) to st.
func declareNamedSlots(t *testing.T, st *eventlog.Store, tag string, n int) {
	t.Helper()
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	for i := range n {
		name := fmt.Sprintf("%s-%d", tag, i)
		appendData(t, st, at, events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}})
	}
}

// startWith starts views over st with snaps and the projections ps
// registered before; log takes the runner's lines.
func startWith(t *testing.T, st *eventlog.Store, snaps *projections.Snapshots, log *slog.Logger, ps ...projections.Projection) *projections.Runner {
	t.Helper()
	ctx := context.Background()
	if log == nil {
		log = quietLog()
	}
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: log})
	for _, p := range ps {
		if err := r.Register(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

func wholeSum(n uint64) uint64 { return n * (n + 1) / 2 }

// The views' snapshot holds every projection's part: a start restores each
// from it and hands them only the events after it, the views' one read.
func TestProjectionsStartFromTheViewsSnapshot(t *testing.T) {
	srv := eventstest.StartServer(t)
	st, _, snaps := retentionStore(t, srv, 0)
	declareNamedSlots(t, st, "a", 10)
	a, b := &seqSum{name: "a"}, &seqSum{name: "b"}
	r := startWith(t, st, snaps, nil, a, b)
	if sum, applied, _ := a.state(); sum != wholeSum(10) || applied != 10 {
		t.Fatalf("first start: sum %d over %d events, want %d over 10", sum, applied, wholeSum(10))
	}
	if err := r.SnapshotNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	declareNamedSlots(t, st, "b", 5)

	a2, b2 := &seqSum{name: "a"}, &seqSum{name: "b"}
	startWith(t, st, snaps, nil, a2, b2)
	for _, p := range []*seqSum{a2, b2} {
		if sum, applied, noHistory := p.state(); sum != wholeSum(15) || applied != 5 || noHistory {
			t.Fatalf("projection %s after the restart: sum %d over %d events handed (no history: %v), want %d over the 5 after the snapshot", p.name, sum, applied, noHistory, wholeSum(15))
		}
	}
}

// A snapshot without a projection's part (written before it was
// registered), or with one it cannot read: the start folds the whole log
// once, for the views and every projection, and says why.
func TestProjectionsWithoutAUsablePartFoldTheLogFromItsStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damaged bool
	}{{"no part", false}, {"damaged part", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := eventstest.StartServer(t)
			st, _, snaps := retentionStore(t, srv, 0)
			declareNamedSlots(t, st, "a", 8)
			old := &seqSum{name: "a"}
			ps := []projections.Projection{old}
			if tc.damaged {
				ps = append(ps, &unreadable{seqSum{name: "b"}})
			}
			r := startWith(t, st, snaps, nil, ps...)
			if err := r.SnapshotNow(context.Background()); err != nil {
				t.Fatal(err)
			}
			declareNamedSlots(t, st, "b", 2)

			var logs bytes.Buffer
			a, b := &seqSum{name: "a"}, &seqSum{name: "b"}
			startWith(t, st, snaps, slog.New(slog.NewTextHandler(&logs, nil)), a, b)
			for _, p := range []*seqSum{a, b} {
				if sum, applied, _ := p.state(); sum != wholeSum(10) || applied != 10 {
					t.Fatalf("projection %s: sum %d over %d events, want the whole log's %d over 10", p.name, sum, applied, wholeSum(10))
				}
			}
			if !strings.Contains(logs.String(), "folding the log from its start") || !strings.Contains(logs.String(), "events=10") {
				t.Fatalf("want one fold of the whole log, said: %s", logs.String())
			}
		})
	}
}

// unreadable saves a part that seqSum cannot read.
type unreadable struct{ seqSum }

func (u *unreadable) WritePart(w io.Writer) error {
	_, err := io.WriteString(w, "not a number")
	return err
}

// A projection registered after the views' start is built from the log up
// to them first, then folds with them.
func TestProjectionRegisteredLateIsBuiltFromTheLog(t *testing.T) {
	srv := eventstest.StartServer(t)
	st, _, snaps := retentionStore(t, srv, 0)
	declareNamedSlots(t, st, "a", 6)
	r := startWith(t, st, snaps, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	late := &seqSum{name: "late"}
	if err := r.Register(ctx, late); err != nil {
		t.Fatal(err)
	}
	if sum, _, _ := late.state(); sum != wholeSum(6) {
		t.Fatalf("built late: sum %d, want %d", sum, wholeSum(6))
	}
	declareNamedSlots(t, st, "b", 3)
	if err := r.WaitFor(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if sum, _, _ := late.state(); sum != wholeSum(9) {
		t.Fatalf("after three more events: sum %d, want %d", sum, wholeSum(9))
	}
}

// Over a log whose older events expired, the snapshot's parts still hold
// the projections' history. Without the snapshot the views start from a
// checkpoint, which holds the views alone: the projections then begin
// without the history, and the start says so.
func TestProjectionsOverAnExpiredLog(t *testing.T) {
	srv := eventstest.StartServer(t)
	const maxAge = 2 * time.Second
	st, cps, snaps := retentionStore(t, srv, maxAge)
	ctx := context.Background()
	alwaysOnClaim(t, st, time.Now().UTC())
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Checkpoints: cps, Logger: quietLog()})
	if err := r.Register(ctx, &seqSum{name: "kept"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err := r.CheckpointNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SnapshotNow(ctx); err != nil {
		t.Fatal(err)
	}
	waitExpired(t, st, cp.Seq+1)
	seq := appendData(t, st, time.Now().UTC(), events.SlotDeclared{Ref: events.Ref{Slot: "b", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://b"}})

	start := func() (*seqSum, string) {
		var logs bytes.Buffer
		kept := &seqSum{name: "kept"}
		r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Checkpoints: cps, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := r.Register(ctx, kept); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return kept, logs.String()
	}
	kept, _ := start()
	if sum, applied, noHistory := kept.state(); sum != wholeSum(seq) || applied != 1 || noHistory {
		t.Fatalf("from the snapshot: sum %d over %d events handed (no history: %v), want %d over 1", sum, applied, noHistory, wholeSum(seq))
	}

	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctx, "claimstream-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	if err := obj.Delete(ctx, "views"); err != nil {
		t.Fatal(err)
	}
	kept, logs := start()
	if sum, _, noHistory := kept.state(); sum != seq || !noHistory {
		t.Fatalf("from the checkpoint: sum %d (no history: %v), want %d without history", sum, noHistory, seq)
	}
	if !strings.Contains(logs, "begins without the history") || !strings.Contains(logs, "projection=kept") {
		t.Fatalf("no line says the projection begins without its history: %s", logs)
	}
}
