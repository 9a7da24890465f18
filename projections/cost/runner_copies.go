package cost

import (
	"context"
	"fmt"

	"github.com/claimstream/claimstream/projections"
)

// Saved copies of the cost index, kept in the checkpoint bucket beside the
// views' checkpoints (projections.IndexCopies): a start loads the newest
// copy the log still reaches and folds only the events after it, instead
// of reading the whole log and making its garbage, and a log whose start
// expired is still covered by the copy.
const (
	costCopyPrefix      = "cost-"
	costCopyEventHeader = "Claimstream-Cost-Event-Id"
)

func costCopyName(seq uint64) string { return projections.CopyName(costCopyPrefix, seq) }

// KeepCopies makes x save a copy of its index in cps as o says, and start from
// the newest copy the log reaches. Call it before Run.
func (x *Runner) KeepCopies(cps *projections.Checkpoints, o projections.CopyOptions) {
	if cps == nil {
		return
	}
	x.copies = projections.NewIndexCopies("cost index", costCopyPrefix, costCopyEventHeader, cps, o, x.log)
}

// loadCopy is the index of the newest saved copy whose seq is at most
// last and that the log agrees with, and that seq; nil when there is none.
// A log whose start expired is still covered by a copy before it.
func (x *Runner) loadCopy(ctx context.Context, last uint64) (*Index, uint64) {
	c := x.copies
	c.SetSaved(0)
	var idx *Index
	in, ok := c.Load(ctx, x.store, last, 0, func(in projections.SavedCopy, raw []byte) error {
		got, seq, err := UnmarshalIndex(raw)
		if err == nil && seq != in.Seq {
			err = fmt.Errorf("it covers seq %d, its name says %d", seq, in.Seq)
		}
		idx = got
		return err
	}, ErrIndexDamaged)
	if !ok {
		return nil, 0
	}
	c.SetSaved(in.Seq)
	return idx, in.Seq
}

// saveCopyIfDue saves a copy when `every` events were folded since the
// last one (force: whenever an event was).
func (x *Runner) saveCopyIfDue(ctx context.Context, force bool) {
	c := x.copies
	if c == nil || !c.Writes() {
		return
	}
	x.catchMu.Lock()
	seq, refused, idx, lastID := x.seq.Load(), x.refused, x.idx.Load(), x.lastID
	due := x.built.Load() && refused == nil && c.Due(seq, force)
	var b []byte
	if due {
		// Under catchMu: no event is folded while the copy is encoded.
		b = idx.MarshalIndex(seq)
	}
	x.catchMu.Unlock()
	if due && c.Save(ctx, seq, lastID, b) {
		c.SetSaved(seq)
	}
}
