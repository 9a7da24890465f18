package cost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	// historyDir is where each index's history file is made (history.go);
	// "" holds the history in memory.
	historyDir string

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
	// noFile is why idx has no history file though historyDir is set;
	// logged is the last history error logged.
	noFile error
	logged error
	// current is idx and noFile for History, which does not wait for mu
	// (a report holds it).
	current atomic.Pointer[currentIndex]
}

type currentIndex struct {
	idx    *Index
	noFile error
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
	x := &Runner{views: views, store: store, historyDir: historyDir}
	x.idx = newIndex(x.historyFile())
	x.current.Store(&currentIndex{x.idx, x.noFile})
	if err := views.Register(ctx, x); err != nil {
		x.idx.close()
		return nil, err
	}
	return x, nil
}

// historyFile is a new index's history file: nil without historyDir, or
// when it cannot be made (noFile says why; the index holds its history in
// memory). The caller holds mu, or owns x.
func (x *Runner) historyFile() *chunkfile.File {
	x.noFile = nil
	if x.historyDir == "" {
		return nil
	}
	f, err := chunkfile.Open(x.historyDir, ".cost-history-")
	if err != nil {
		x.noFile = err
		x.logHistory(err)
		return nil
	}
	return f
}

// logHistory logs err, once, when the index holds history in memory that
// belongs on disk. The caller holds mu, or owns x.
func (x *Runner) logHistory(err error) {
	if err == nil || err == x.logged {
		return
	}
	x.logged = err
	slog.Warn("the cost index holds its history in memory: it cannot write it to disk", "dir", x.historyDir, "err", err)
}

// History says where the index holds its history, and why in memory
// when it belongs on disk.
func (x *Runner) History() History {
	c := x.current.Load()
	h := c.idx.History()
	if h.Err == nil {
		h.Err = c.noFile
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
	x.idx.close()
	x.idx, x.expired = newIndex(x.historyFile()), nil
	x.current.Store(&currentIndex{x.idx, x.noFile})
	if part == nil {
		if st.Seq > 0 {
			x.expired = &ExpiredLogError{first: st.Seq + 1}
		}
		return nil
	}
	// The copy's chunks go to a file of their own: the empty index's
	// stays for it should the copy be refused.
	history := x.historyFile()
	idx, seq, err := unmarshalIndexFrom(part, part.Len(), history)
	if err == nil && seq != st.Seq {
		err = fmt.Errorf("it covers seq %d, the views %d", seq, st.Seq)
	}
	if err != nil {
		if history != nil {
			_ = history.Close()
		}
		if st.Seq > 0 {
			x.expired = &ExpiredLogError{first: st.Seq + 1}
		}
		return fmt.Errorf("cost index: %w", err)
	}
	x.idx.close()
	x.idx = idx
	x.current.Store(&currentIndex{x.idx, x.noFile})
	x.logHistory(idx.History().Err)
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
	// Only this goroutine (under mu) writes the index: its fields read
	// as Apply left them.
	x.logHistory(x.idx.held.err)
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
