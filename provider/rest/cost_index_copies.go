package rest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
)

// Saved copies of the cost index, kept in the checkpoint bucket beside the
// views' checkpoints: a start loads the newest copy the log still reaches
// and folds only the events after it, instead of the whole log (about 6 s
// and most of a start's garbage at a million events), and a log whose
// start expired is still covered by the copy.
const (
	costCopyPrefix = "cost-"
	// costCopiesKept: the newest copy, and the one before it should the
	// newest turn out damaged.
	costCopiesKept = 2
	// costCopyEventHeader is the ID of the last event the copy folded: a
	// copy whose event the log holds with another ID belongs to another
	// log (a restore of another backup).
	costCopyEventHeader = "Claimstream-Cost-Event-Id"
	// costCopySaveTimeout bounds the save at shutdown.
	costCopySaveTimeout = 5 * time.Second
)

func costCopyName(seq uint64) string { return fmt.Sprintf("%s%020d", costCopyPrefix, seq) }

// costCopies is where and how often CostIndex saves its copies.
type costCopies struct {
	store *projections.Checkpoints
	every uint64
	// writer, when set, says whether this replica writes the copies (the
	// leader, as for the views' checkpoints).
	writer func() bool
	// saved is the seq of the newest copy written or loaded (atomic: a
	// report's catch-up may load one while Run saves).
	saved atomic.Uint64
}

// KeepCopies makes x save a copy of its index in cps every `every` events
// (0: 10,000) and at a clean shutdown, and start from the newest copy the
// log reaches. writer (nil: always) says whether this replica writes them.
// Call it before Run.
func (x *CostIndex) KeepCopies(cps *projections.Checkpoints, every uint64, writer func() bool) {
	if cps == nil {
		return
	}
	if every == 0 {
		every = 10_000
	}
	x.copies = &costCopies{store: cps, every: every, writer: writer}
}

type costCopyInfo struct {
	name    string
	seq     uint64
	eventID string
	size    uint64
}

// listCopies lists the saved copies, newest first.
func (c *costCopies) list(ctx context.Context) ([]costCopyInfo, error) {
	objs, err := c.store.ListNamed(ctx, costCopyPrefix)
	if err != nil {
		return nil, err
	}
	var out []costCopyInfo
	for _, o := range objs {
		seq, err := strconv.ParseUint(strings.TrimPrefix(o.Name, costCopyPrefix), 10, 64)
		if err != nil {
			continue // not one of ours
		}
		out = append(out, costCopyInfo{name: o.Name, seq: seq, eventID: o.Headers[costCopyEventHeader], size: o.Size})
	}
	slices.SortFunc(out, func(a, b costCopyInfo) int { return cmp.Compare(b.seq, a.seq) })
	return out, nil
}

// loadCopy is the index of the newest saved copy whose seq is at most
// last and that the log agrees with, and that seq; nil when there is none.
// A copy that cannot be read or decoded, or that belongs to another log, is
// reported and passed over for the next older one.
func (x *CostIndex) loadCopy(ctx context.Context, last uint64) (*cost.Index, uint64) {
	c := x.copies
	c.saved.Store(0)
	copies, err := c.list(ctx)
	if err != nil {
		x.log.Warn("cannot list the saved cost index copies; rebuilding the cost index from the log", "err", err)
		return nil, 0
	}
	for _, in := range copies {
		if in.seq > last {
			x.log.Warn(fmt.Sprintf("cost index copy %s is ahead of the event log, which ends at seq %d (restored from an older backup?); ignoring it", in.name, last))
			continue
		}
		if in.eventID != "" {
			e, err := x.store.Get(ctx, in.seq)
			if err == nil && e.ID != in.eventID {
				x.log.Warn(fmt.Sprintf("cost index copy %s does not match the event log (its event at seq %d has another id; restored from another backup?); ignoring it", in.name, in.seq))
				continue
			}
		}
		b, err := c.store.GetNamed(ctx, in.name)
		if err != nil {
			x.log.Warn(fmt.Sprintf("cost index copy %s cannot be read; rebuilding from the log", in.name), "err", err)
			continue
		}
		idx, seq, err := cost.UnmarshalIndex(b)
		if err == nil && seq != in.seq {
			err = fmt.Errorf("it covers seq %d, its name says %d", seq, in.seq)
		}
		if err != nil {
			x.log.Warn(fmt.Sprintf("cost index copy %s is damaged (%s); rebuilding from the log", in.name, strings.TrimPrefix(err.Error(), cost.ErrIndexDamaged.Error()+": ")))
			continue
		}
		c.saved.Store(seq)
		x.log.Info("cost index loaded from its saved copy", "copy", in.name, "bytes", len(b), "spans", idx.Spans())
		return idx, seq
	}
	return nil, 0
}

// saveCopyIfDue saves a copy when `every` events were folded since the
// last one (force: whenever an event was), then keeps only the newest
// costCopiesKept (and none ahead of the log).
func (x *CostIndex) saveCopyIfDue(ctx context.Context, force bool) {
	c := x.copies
	if c == nil || (c.writer != nil && !c.writer()) {
		return
	}
	x.catchMu.Lock()
	seq, refused, idx, lastID := x.seq.Load(), x.refused, x.idx.Load(), x.lastID
	due := x.built.Load() && refused == nil && seq > c.saved.Load() && (force || seq-c.saved.Load() >= c.every)
	var b []byte
	if due {
		// Under catchMu: no event is folded while the copy is encoded.
		b = idx.MarshalIndex(seq)
	}
	x.catchMu.Unlock()
	if !due {
		return
	}
	start := time.Now()
	name := costCopyName(seq)
	headers := map[string]string{}
	if lastID != "" {
		headers[costCopyEventHeader] = lastID
	}
	if err := c.store.PutNamed(ctx, name, headers, b); err != nil {
		if ctx.Err() != nil {
			return // shutting down: saveCopyAtShutdown saves it again
		}
		x.log.Warn("cannot save a copy of the cost index; the next start folds more of the log", "copy", name, "err", err)
		return
	}
	c.saved.Store(seq)
	x.log.Info("cost index copy saved", "copy", name, "bytes", len(b), "took", time.Since(start).Round(time.Millisecond))
	copies, err := c.list(ctx)
	if err != nil {
		x.log.Warn("cannot list the saved cost index copies to prune them", "err", err)
		return
	}
	kept := 0
	for _, in := range copies {
		if in.seq <= seq && kept < costCopiesKept {
			kept++
			continue
		}
		if err := c.store.DeleteNamed(ctx, in.name); err != nil {
			x.log.Warn("cannot delete an old cost index copy", "copy", in.name, "err", err)
		}
	}
}

// saveCopyAtShutdown saves what was folded since the last copy, in bounded
// time, as Run ends.
func (x *CostIndex) saveCopyAtShutdown(ctx context.Context) {
	if x.copies == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), costCopySaveTimeout)
	defer cancel()
	x.saveCopyIfDue(ctx, true)
}
