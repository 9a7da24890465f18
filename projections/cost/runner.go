package cost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/projections"
)

// Runner keeps the cost accounting of the whole log in memory (Index), so
// GET /api/v1/cost walks its spans instead of folding the log from seq 1
// per request, and the cost counters read its running totals
// (SlotTotals). It is a projection of the views' runner: folded with the
// views, event by event, and saved in their snapshots, so a start restores
// it with them and serve reads the log's history once.
//
// While the views are being built a request is refused with BuildingError
// (503, Retry-After) saying how far the build is. A log with missing
// sequences is refused (412), and so is one whose start expired (410)
// unless the snapshot the views began from held the index.
type Runner struct {
	views *projections.Runner
	store *eventlog.Store
	// history is the file every index of the runner keeps its full chunks
	// in (history.go): a restore releases the replaced index's.
	// Nil without a directory, or when it could not be made (noFile).
	history *chunkfile.File
	noFile  error

	// pending holds the events the views folded that the index has not
	// applied yet (a report held mu); seq is the last event handed over,
	// or the views' at Restore.
	pending projections.Handover[events.Event]
	seq     atomic.Uint64

	mu  sync.Mutex
	idx *Index
	// expired, when set, is why the index cannot report: it began
	// without the history the log no longer holds.
	expired error
	// current is idx for History, which does not wait for mu (a report
	// holds it).
	current atomic.Pointer[Index]
}

// projectionName keys the index's part of the views' snapshots.
const projectionName = "cost"

// BuildingError is the answer while the views, and the index with them,
// are built: Folded of Of events.
type BuildingError struct{ Folded, Of uint64 }

func (e *BuildingError) Error() string {
	pct := 0.0
	if e.Of > 0 {
		pct = 100 * float64(e.Folded) / float64(e.Of)
	}
	return fmt.Sprintf("the cost index is being built from the event log (%d of %d events folded, %.0f%%); retry in a few seconds", e.Folded, e.Of, pct)
}

// NewRunner keeps a cost index of store's log folded by views: call it
// before views.Start (or the index is built from the log first; the views
// log why it begins without history, if it does). The index's history
// goes to an unlinked file in historyDir (serve's data dir), or stays in
// memory when historyDir is "".
func NewRunner(ctx context.Context, views *projections.Runner, store *eventlog.Store, historyDir string) (*Runner, error) {
	x := &Runner{views: views, store: store}
	if historyDir != "" {
		x.history, x.noFile = chunkfile.Open(historyDir, projectionName)
	}
	x.setIndex(newIndex(x.history))
	if err := views.Register(ctx, x); err != nil {
		if x.history != nil {
			_ = x.history.Close()
		}
		return nil, err
	}
	return x, nil
}

// setIndex makes idx the index, releasing the one it replaces. The caller
// holds mu, or owns x.
func (x *Runner) setIndex(idx *Index) {
	if x.idx != nil {
		x.idx.release()
	}
	x.idx = idx
	x.current.Store(idx)
}

// History says where the index holds its history, and why in memory
// when it belongs on disk.
func (x *Runner) History() History {
	h := x.current.Load().History()
	if h.Err == nil {
		h.Err = x.noFile
	}
	return h
}

// Name is the index's part of a snapshot (projections.Projection).
func (x *Runner) Name() string { return projectionName }

// Restore begins the index at the views st (projections.Projection).
func (x *Runner) Restore(st *projections.State, part projections.Part) error {
	x.pending.Reset()
	x.seq.Store(st.Seq)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.setIndex(newIndex(x.history))
	x.expired = nil
	if part == nil {
		if st.Seq > 0 {
			x.expired = &ExpiredLogError{first: st.Seq + 1}
		}
		return nil
	}
	idx, seq, err := unmarshalIndexFrom(part, part.Len(), x.history)
	if err == nil && seq != st.Seq {
		idx.release()
		err = fmt.Errorf("it covers seq %d, the views %d", seq, st.Seq)
	}
	if err != nil {
		if st.Seq > 0 {
			x.expired = &ExpiredLogError{first: st.Seq + 1}
		}
		return fmt.Errorf("cost index: %w", err)
	}
	x.setIndex(idx)
	return nil
}

// Apply hands e over to the index (projections.Projection): it runs
// under the views' lock, so it applies e only when no report holds the
// index, and queues it otherwise.
func (x *Runner) Apply(_ *projections.State, e events.Event) {
	x.seq.Store(e.Seq)
	x.pending.Put(&x.mu, x.applyLocked, e)
}

// applyLocked applies events handed over; the caller holds mu.
func (x *Runner) applyLocked(evs []events.Event) {
	for _, e := range evs {
		x.idx.Apply(e)
	}
}

// WritePart writes the index's part of a snapshot to w
// (projections.Projection).
func (x *Runner) WritePart(w io.Writer) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pending.Drain(x.applyLocked)
	return x.idx.WriteIndex(w, x.seq.Load())
}

// Report is the cost report of [since, until) by dim over every event
// appended before the call.
func (x *Runner) Report(ctx context.Context, dim Dimension, since, until time.Time) (Report, error) {
	if folded, of, done := x.views.StartProgress(); !done {
		return Report{}, &BuildingError{Folded: folded, Of: of}
	}
	last, err := x.store.LastSeq(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("cost index: the log's last event: %w", err)
	}
	if err := x.views.WaitFor(ctx, last); err != nil {
		return Report{}, fmt.Errorf("cost index: %w", err)
	}
	if gaps := x.views.Gaps(); len(gaps) > 0 {
		return Report{}, &DamagedLogError{err: errors.New(gaps.String())}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.expired != nil {
		return Report{}, x.expired
	}
	x.pending.Drain(x.applyLocked)
	return x.idx.Report(dim, since, until, until)
}

// SlotTotals is every slot's cost so far, machines still up counted until
// end: what the cost counters export (NewFold(BySlot, ...) of the log,
// SlotTotals(end)). It reads no log: it is false until the views are
// built, and covers the events they folded.
func (x *Runner) SlotTotals(end time.Time) ([]SlotTotal, bool) {
	if _, _, done := x.views.StartProgress(); !done {
		return nil, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pending.Drain(x.applyLocked)
	return x.idx.SlotTotals(end), true
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
