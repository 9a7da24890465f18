package rest

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
)

// Saved copies of the cost index, kept in the checkpoint bucket beside the
// views' checkpoints (savedCopies): a start loads the newest copy the log
// still reaches and folds only the events after it, instead of reading the
// whole log and making its garbage, and a log whose start expired is still
// covered by the copy.
const (
	costCopyPrefix      = "cost-"
	costCopyEventHeader = "Claimstream-Cost-Event-Id"
)

func costCopyName(seq uint64) string { return copyName(costCopyPrefix, seq) }

// costCopies is where and how often CostIndex saves its copies.
type costCopies struct {
	*savedCopies
	// saved is the seq of the newest copy written or loaded (atomic: a
	// report's catch-up may load one while Run saves).
	saved atomic.Uint64
}

// KeepCopies makes x save a copy of its index in cps as o says, and start from
// the newest copy the log reaches. Call it before Run.
func (x *CostIndex) KeepCopies(cps *projections.Checkpoints, o CopyOptions) {
	if cps == nil {
		return
	}
	x.copies = &costCopies{savedCopies: newSavedCopies("cost index", costCopyPrefix, costCopyEventHeader, cps, o, x.log)}
}

// loadCopy is the index of the newest saved copy whose seq is at most
// last and that the log agrees with, and that seq; nil when there is none.
// A log whose start expired is still covered by a copy before it.
func (x *CostIndex) loadCopy(ctx context.Context, last uint64) (*cost.Index, uint64) {
	c := x.copies
	c.saved.Store(0)
	var idx *cost.Index
	in, ok := c.load(ctx, x.store, last, 0, func(in savedCopy, raw []byte) error {
		got, seq, err := cost.UnmarshalIndex(raw)
		if err == nil && seq != in.seq {
			err = fmt.Errorf("it covers seq %d, its name says %d", seq, in.seq)
		}
		idx = got
		return err
	}, cost.ErrIndexDamaged)
	if !ok {
		return nil, 0
	}
	c.saved.Store(in.seq)
	return idx, in.seq
}

// saveCopyIfDue saves a copy when `every` events were folded since the
// last one (force: whenever an event was).
func (x *CostIndex) saveCopyIfDue(ctx context.Context, force bool) {
	c := x.copies
	if c == nil || !c.writes() {
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
	if due && c.save(ctx, seq, lastID, b) {
		c.saved.Store(seq)
	}
}

// saveCopyAtShutdown saves what was folded since the last copy, in bounded
// time, as Run ends.
func (x *CostIndex) saveCopyAtShutdown(ctx context.Context) {
	if x.copies == nil {
		return
	}
	ctx, cancel := shutdownContext(ctx)
	defer cancel()
	x.saveCopyIfDue(ctx, true)
}
