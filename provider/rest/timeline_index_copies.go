package rest

import (
	"context"
	"fmt"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Saved copies of the timeline index, kept in the checkpoint bucket beside
// the views' checkpoints and the cost index's copies (savedCopies): a start
// loads the newest copy the log still reaches and folds only the events
// after it, instead of reading the month the index holds from the log (at
// a million events, the whole log: seconds, and the embedded server's
// per-block subject indexes held for minutes after).
const (
	timelineCopyPrefix      = "timeline-"
	timelineCopyEventHeader = "Claimstream-Timeline-Event-Id"
)

// timelineCopies is where and how often TimelineIndex saves its copies.
type timelineCopies struct {
	*savedCopies
	// saved is the seq of the newest copy written or loaded (under the
	// index's mu).
	saved uint64
}

// KeepCopies makes x save a copy of itself in cps as o says, and start from
// the newest copy the log reaches. Call it before Run.
func (x *TimelineIndex) KeepCopies(cps *projections.Checkpoints, o CopyOptions) {
	if cps == nil {
		return
	}
	x.copies = &timelineCopies{savedCopies: newSavedCopies("timeline index", timelineCopyPrefix, timelineCopyEventHeader, cps, o, x.log)}
}

// loadCopy starts x from the newest saved copy that the log of bounds b
// continues (its seq at most b.Last, no expired event after it, its last
// event's ID the log's) and reports whether it did; with none, x starts
// from the log. The caller holds x.mu.
func (x *TimelineIndex) loadCopy(ctx context.Context, b events.Bounds) bool {
	c := x.copies
	first := uint64(0)
	if b.Truncated() {
		first = b.First
	}
	var got *timelineContents
	in, ok := c.load(ctx, x.store, b.Last, first, func(in savedCopy, raw []byte) error {
		var err error
		got, err = unmarshalTimelineIndex(raw)
		if err == nil && got.st.Seq != in.seq {
			err = fmt.Errorf("it covers seq %d, its name says %d", got.st.Seq, in.seq)
		}
		return err
	}, ErrTimelineCopyDamaged)
	if !ok {
		return false
	}
	x.st, x.heldFrom, x.newest, x.slots, x.eventsAt, x.phases = got.st, got.heldFrom, got.newest, got.slots, got.eventsAt, got.phases
	x.phaseCode = make(map[string]uint8, len(got.phases))
	for i, p := range got.phases {
		x.phaseCode[p] = uint8(i)
	}
	x.lastID = in.eventID
	c.saved = in.seq
	return true
}

// saveCopyIfDue saves a copy when `every` events were folded since the
// last one (force: whenever an event was).
func (x *TimelineIndex) saveCopyIfDue(ctx context.Context, force bool) {
	c := x.copies
	if c == nil || !c.writes() {
		return
	}
	x.mu.Lock()
	seq := uint64(0)
	if x.st != nil {
		seq = x.st.Seq
	}
	due := x.ok && x.broken == nil && seq > c.saved && (force || seq-c.saved >= c.every)
	var b []byte
	var err error
	lastID := x.lastID
	if due {
		// Under mu: no event is folded while the copy is encoded.
		b, err = x.marshal()
	}
	x.mu.Unlock()
	if !due {
		return
	}
	if err != nil {
		x.log.Warn("cannot encode a copy of the timeline index; the next start folds more of the log", "copy", c.name(seq), "err", err)
		return
	}
	if c.save(ctx, seq, lastID, b) {
		x.mu.Lock()
		c.saved = max(c.saved, seq)
		x.mu.Unlock()
	}
}

// saveCopyAtShutdown saves what was folded since the last copy, in bounded
// time, as Run ends.
func (x *TimelineIndex) saveCopyAtShutdown(ctx context.Context) {
	if x.copies == nil {
		return
	}
	ctx, cancel := shutdownContext(ctx)
	defer cancel()
	x.saveCopyIfDue(ctx, true)
}
