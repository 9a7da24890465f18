package cost

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// Runner keeps the cost accounting of the whole log in memory
// (Index), so GET /api/v1/cost walks its spans instead of folding the
// log from seq 1 per request (a read and fold that grows with the log), and
// the cost counters read its running totals (SlotTotals): serve reads the
// log's history once for both. It folds the log once, then each new event the
// views' runner folds (runner_follow.go); a request first folds whatever
// Run has not yet, so a report reflects every event appended before it.
//
// While the first fold is under way a request is refused with
// BuildingError (503, Retry-After) saying how far it is. A log
// with missing sequences is refused (412) and a log whose start expired
// (410) unless a saved copy of the index covers what expired, as the fold
// from seq 1 would be. With KeepCopies, a start loads the newest saved
// copy and folds only the events after it.
type Runner struct {
	store *eventlog.Store
	log   *slog.Logger

	// catchMu: one fold of the log at a time.
	catchMu sync.Mutex
	// idx is swapped for an empty one when the log is replaced (a
	// restore); the counters read it without catchMu.
	idx atomic.Pointer[Index]
	// refused, when set, is why the index cannot report (a damaged or
	// expired log); it stays until the process restarts.
	refused error

	// copies, when set, are the saved copies of the index a start
	// continues from (KeepCopies, runner_copies.go); lastID is the ID
	// of the last event folded, under catchMu.
	copies *projections.IndexCopies
	lastID string

	// feed is the events the views' runner folded, for Run to apply
	// (runner_follow.go).
	feed costFeed

	running atomic.Bool   // Run keeps the index current
	built   atomic.Bool   // the first fold reached the log's end
	seq     atomic.Uint64 // the last event folded
	target  atomic.Uint64 // the log's last event when the fold started
}

// BuildingError is the answer while the index's first fold of the
// log is under way: Folded of Of events.
type BuildingError struct{ Folded, Of uint64 }

func (e *BuildingError) Error() string {
	pct := 0.0
	if e.Of > 0 {
		pct = 100 * float64(e.Folded) / float64(e.Of)
	}
	return fmt.Sprintf("the cost index is being built from the event log (%d of %d events folded, %.0f%%); retry in a few seconds", e.Folded, e.Of, pct)
}

// NewRunner indexes store's log. log (default slog's) is told when the
// index is built and when it cannot follow the log.
func NewRunner(store *eventlog.Store, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.Default()
	}
	x := &Runner{store: store, log: log}
	x.idx.Store(NewIndex())
	return x
}

// Run keeps the index current until ctx ends: it folds the log now (the
// start-up build, in the background of serve's other work), then each
// batch of new events as views announces them.
func (x *Runner) Run(ctx context.Context, views *projections.Runner) error {
	x.running.Store(true)
	defer x.running.Store(false)
	return projections.Follow(ctx, views, projections.Follower{
		CatchUp: func(ctx context.Context) error {
			if x.applyFed() {
				return x.refusal()
			}
			return x.catchUp(ctx)
		},
		Fed:      x.feed.add,
		Copies:   x.copies,
		SaveCopy: x.saveCopyIfDue,
		Failing: func(err error) {
			if x.refusedNow() {
				x.log.Warn("cost reports are refused until restart; the cost counters count the events the log holds", "err", err)
			} else {
				x.log.Warn("cost index cannot follow the log; cost reports are refused until it does", "err", err)
			}
		},
		Recovered: func() { x.log.Info("cost index follows the log again", "seq", x.seq.Load()) },
	})
}

// catchUp folds the events the index has not seen yet. A log whose start
// expired, or with missing sequences, is still folded as far as it goes
// (the cost counters count what it holds, as a fold from seq 1 would), but
// its reports are refused: catchUp returns why.
func (x *Runner) catchUp(ctx context.Context) error {
	x.catchMu.Lock()
	defer x.catchMu.Unlock()
	last, err := x.store.LastSeq(ctx)
	if err != nil {
		return err
	}
	if last < x.seq.Load() {
		// The log is shorter than what was folded: it was replaced (a
		// restore). Start again from its first event.
		x.log.Warn("the event log ends before what the cost index folded (restored?); rebuilding the cost index", "log_last", last, "folded", x.seq.Load())
		x.idx.Store(NewIndex())
		x.seq.Store(0)
		x.built.Store(false)
	}
	first := !x.built.Load()
	var fromCopy uint64
	if first && x.seq.Load() == 0 {
		if x.copies != nil {
			if idx, seq := x.loadCopy(ctx, last); idx != nil {
				x.idx.Store(idx)
				x.seq.Store(seq)
				fromCopy = seq
			}
		}
		b, err := x.store.Bounds(ctx)
		if err != nil {
			return err
		}
		// Expired events a saved copy folded are no loss.
		if b.Truncated() && b.First > fromCopy+1 {
			x.refused = &ExpiredLogError{first: b.First}
			x.seq.Store(b.First - 1)
		}
	}
	start := time.Now()
	x.target.Store(last)
	idx := x.idx.Load()
	if last > x.seq.Load() {
		err = x.store.Read(ctx, x.seq.Load()+1, last, func(e events.Event) error {
			if e.Seq > x.seq.Load() {
				idx.Apply(e)
				x.seq.Store(e.Seq)
				x.lastID = e.ID
			}
			return nil
		})
	}
	if gaps := eventlog.GapsOf(err); gaps != nil {
		if x.refused == nil {
			x.refused = &DamagedLogError{err: err}
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("cost index: reading the log from seq %d: %w", x.seq.Load()+1, err)
	}
	x.seq.Store(max(x.seq.Load(), last))
	if first {
		x.built.Store(true)
		x.log.Info("cost index built", "events", last, "from_copy", fromCopy, "spans", idx.Spans(), "took", time.Since(start).Round(time.Millisecond))
	}
	return x.refused
}

// Report is the cost report of [since, until) by dim over every event
// appended before the call. Without Run, the first call folds the log
// itself.
func (x *Runner) Report(ctx context.Context, dim Dimension, since, until time.Time) (Report, error) {
	if !x.built.Load() && x.running.Load() {
		// Run is folding the log; a request does not wait seconds for it.
		// TryLock: a fold that has just ended leaves the lock free.
		if !x.catchMu.TryLock() {
			return Report{}, &BuildingError{Folded: x.seq.Load(), Of: x.target.Load()}
		}
		x.catchMu.Unlock()
	}
	// What the runner handed over first: the catch-up then reads only
	// what it has not folded yet, mostly nothing.
	x.applyFed()
	if err := x.catchUp(ctx); err != nil {
		return Report{}, err
	}
	return x.idx.Load().Report(dim, since, until, until), nil
}

// refusedNow reports whether the index refuses reports for good (a damaged
// or expired log) rather than failing to read.
func (x *Runner) refusedNow() bool {
	x.catchMu.Lock()
	defer x.catchMu.Unlock()
	return x.refused != nil
}

// SlotTotals is every slot's cost so far, machines still up counted until
// end: what the cost counters export (NewFold(BySlot, ...) of the log,
// SlotTotals(end)). It reads no log: it is false until the index's first
// fold reached the log's end, and covers the events Run has folded.
func (x *Runner) SlotTotals(end time.Time) ([]SlotTotal, bool) {
	if !x.built.Load() {
		return nil, false
	}
	return x.idx.Load().SlotTotals(end), true
}

// DamagedLogError: the log has missing sequences; the report would
// silently lack their power facts.
type DamagedLogError struct{ err error }

func (e *DamagedLogError) Error() string {
	return "cannot report over a damaged log (sequences missing): " + e.err.Error()
}

func (e *DamagedLogError) Unwrap() error { return e.err }

// ExpiredLogError: the log's start expired; a machine's state at a
// period's start comes from power facts that are gone.
type ExpiredLogError struct{ first uint64 }

func (e *ExpiredLogError) Error() string {
	return fmt.Sprintf("cannot report cost: the event log starts at seq %d (the events before it expired), and a report needs every power fact and claim from the log's start", e.first)
}
