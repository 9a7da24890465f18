package timeline

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// Saved copies of the timeline index, kept in the checkpoint bucket beside
// the views' checkpoints and the cost index's copies
// (projections.IndexCopies): a start
// loads the newest copy the log still reaches and folds only the events
// after it, instead of reading the month the index holds from the log (at
// a million events, the whole log: seconds, and the embedded server's
// per-block subject indexes held for minutes after).
const (
	timelineCopyPrefix      = "timeline-"
	timelineCopyEventHeader = "Claimstream-Timeline-Event-Id"
)

// KeepCopies makes x save a copy of itself in cps as o says, and start from
// the newest copy the log reaches. Call it before Run.
func (x *Index) KeepCopies(cps *projections.Checkpoints, o projections.CopyOptions) {
	if cps == nil {
		return
	}
	x.copies = projections.NewIndexCopies("timeline index", timelineCopyPrefix, timelineCopyEventHeader, cps, o, x.log)
}

// loadCopy starts x from the newest saved copy that the log of bounds b
// continues (its seq at most b.Last, no expired event after it, its last
// event's ID the log's) and reports whether it did; with none, x starts
// from the log. The caller holds x.mu.
func (x *Index) loadCopy(ctx context.Context, b eventlog.Bounds) bool {
	c := x.copies
	first := uint64(0)
	if b.Truncated() {
		first = b.First
	}
	var got *timelineContents
	in, ok := c.Load(ctx, x.store, b.Last, first, func(in projections.SavedCopy, raw []byte) error {
		var err error
		got, err = unmarshalTimelineIndex(raw)
		if err == nil && got.st.Seq != in.Seq {
			err = fmt.Errorf("it covers seq %d, its name says %d", got.st.Seq, in.Seq)
		}
		return err
	}, errCopyDamaged)
	if !ok {
		return false
	}
	x.install(got)
	x.lastID = in.EventID
	c.SetSaved(in.Seq)
	return true
}

// install makes x hold what a copy held. The caller holds x.mu.
func (x *Index) install(c *timelineContents) {
	x.st, x.heldFrom, x.newest, x.slots, x.eventsAt, x.phases = c.st, c.heldFrom, c.newest, c.slots, c.eventsAt, c.phases
	x.seq, x.ok = c.st.Seq, true
	for name, l := range x.slots {
		if sl := c.st.Slots[name]; sl != nil {
			l.group = sl.Group
		}
	}
	x.phaseCode = make(map[string]uint8, len(c.phases))
	for i, p := range c.phases {
		x.phaseCode[p] = uint8(i)
	}
}

// saveCopyIfDue saves a copy when `every` events were folded since the
// last one (force: whenever an event was). An index that follows the
// views' runner has no views of its own: the copy takes the runner's,
// under their read lock, once the index has applied every record up to
// them (at 10,000 slots the encoding holds the runner's folds back for a
// moment, as its own checkpoints do).
func (x *Index) saveCopyIfDue(ctx context.Context, force bool) {
	c := x.copies
	if c == nil || !c.Writes() {
		return
	}
	x.mu.Lock()
	following, views := x.following(), x.views
	// Run applies the records before it asks: no need to hold the views
	// back to learn that no copy is due yet.
	soon := c.Soon(x.seq, force)
	x.mu.Unlock()
	if !soon {
		return
	}
	var seq uint64
	var lastID string
	var b []byte
	var err error
	due := false
	encode := func(runnerViews *projections.State) {
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.following() && !x.applyFeed() {
			return // lost its place: the next catch-up builds it again
		}
		seq, lastID = x.seq, x.lastID
		due = x.ok && x.broken == nil && c.Due(seq, force)
		if !due {
			return
		}
		// Under mu: no event is applied while the copy is encoded.
		switch {
		case x.st != nil:
			b, err = x.marshal()
		case runnerViews != nil && runnerViews.Seq == x.seq:
			var v []byte
			if v, err = json.Marshal(runnerViews); err == nil {
				b = x.marshalWith(v)
			}
		default:
			due = false // the views moved on without a record: no copy this time
		}
	}
	if following && views != nil {
		views.Read(encode)
	} else {
		encode(nil)
	}
	if !due {
		return
	}
	if err != nil {
		x.log.Warn("cannot encode a copy of the timeline index; the next start folds more of the log", "copy", c.Name(seq), "err", err)
		return
	}
	if c.Save(ctx, seq, lastID, b) {
		x.mu.Lock()
		c.SetSaved(max(c.Saved(), seq))
		x.mu.Unlock()
	}
}
