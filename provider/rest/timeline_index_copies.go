package rest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Saved copies of the timeline index, kept in the checkpoint bucket beside
// the views' checkpoints and the cost index's copies: a start loads the
// newest copy the log still reaches and folds only the events after it,
// instead of reading the month the index holds from the log (at a million
// events, the whole log: seconds, and the embedded server's per-block
// subject indexes held for minutes after).
const (
	timelineCopyPrefix = "timeline-"
	// timelineCopiesKept: the newest copy, and the one before it should the
	// newest turn out damaged.
	timelineCopiesKept = 2
	// timelineCopyEventHeader is the ID of the last event the copy folded:
	// a copy whose event the log holds with another ID belongs to another
	// log (a restore of another backup).
	timelineCopyEventHeader = "Claimstream-Timeline-Event-Id"
	// timelineCopySaveTimeout bounds the save at shutdown.
	timelineCopySaveTimeout = 5 * time.Second
)

func timelineCopyName(seq uint64) string {
	return fmt.Sprintf("%s%020d", timelineCopyPrefix, seq)
}

// timelineCopies is where and how often TimelineIndex saves its copies.
type timelineCopies struct {
	store *projections.Checkpoints
	every uint64
	// writer, when set, says whether this replica writes the copies (the
	// leader, as for the views' checkpoints).
	writer func() bool
	// saved is the seq of the newest copy written or loaded (under the
	// index's mu).
	saved uint64
}

// KeepCopies makes x save a copy of itself in cps every `every` events (0:
// 10,000) and at a clean shutdown, and start from the newest copy the log
// reaches. writer (nil: always) says whether this replica writes them. Call
// it before Run.
func (x *TimelineIndex) KeepCopies(cps *projections.Checkpoints, every uint64, writer func() bool) {
	if cps == nil {
		return
	}
	if every == 0 {
		every = 10_000
	}
	x.copies = &timelineCopies{store: cps, every: every, writer: writer}
}

type timelineCopyInfo struct {
	name    string
	seq     uint64
	eventID string
}

// list lists the saved copies, newest first.
func (c *timelineCopies) list(ctx context.Context) ([]timelineCopyInfo, error) {
	objs, err := c.store.ListNamed(ctx, timelineCopyPrefix)
	if err != nil {
		return nil, err
	}
	var out []timelineCopyInfo
	for _, o := range objs {
		seq, err := strconv.ParseUint(strings.TrimPrefix(o.Name, timelineCopyPrefix), 10, 64)
		if err != nil {
			continue // not one of ours
		}
		out = append(out, timelineCopyInfo{name: o.Name, seq: seq, eventID: o.Headers[timelineCopyEventHeader]})
	}
	slices.SortFunc(out, func(a, b timelineCopyInfo) int { return cmp.Compare(b.seq, a.seq) })
	return out, nil
}

// loadCopy starts x from the newest saved copy that the log of bounds b
// continues (its seq at most b.Last, no expired event after it, its last
// event's ID the log's) and reports whether it did. A copy that cannot be
// read or decoded, or that belongs to another log, is reported in one line
// and passed over for the next older one; with none, x starts from the log.
// The caller holds x.mu.
func (x *TimelineIndex) loadCopy(ctx context.Context, b events.Bounds) bool {
	c := x.copies
	copies, err := c.list(ctx)
	if err != nil {
		x.log.Warn("cannot list the saved timeline index copies; building the timeline index from the log", "err", err)
		return false
	}
	for _, in := range copies {
		if in.seq > b.Last {
			x.log.Warn(fmt.Sprintf("timeline index copy %s is ahead of the event log, which ends at seq %d (restored from an older backup?); ignoring it", in.name, b.Last))
			continue
		}
		if b.Truncated() && in.seq+1 < b.First {
			x.log.Warn(fmt.Sprintf("timeline index copy %s ends before the event log's first event (seq %d; the events between expired); ignoring it", in.name, b.First))
			continue
		}
		if in.eventID != "" {
			e, err := x.store.Get(ctx, in.seq)
			if err == nil && e.ID != in.eventID {
				x.log.Warn(fmt.Sprintf("timeline index copy %s does not match the event log (its event at seq %d has another id; restored from another backup?); ignoring it", in.name, in.seq))
				continue
			}
		}
		raw, err := c.store.GetNamed(ctx, in.name)
		if err != nil {
			x.log.Warn(fmt.Sprintf("timeline index copy %s cannot be read; trying an older copy or the log", in.name), "err", err)
			continue
		}
		got, err := unmarshalTimelineIndex(raw)
		if err == nil && got.st.Seq != in.seq {
			err = fmt.Errorf("it covers seq %d, its name says %d", got.st.Seq, in.seq)
		}
		if err != nil {
			x.log.Warn(fmt.Sprintf("timeline index copy %s is damaged (%s); trying an older copy or the log", in.name, strings.TrimPrefix(err.Error(), ErrTimelineCopyDamaged.Error()+": ")))
			continue
		}
		x.st, x.heldFrom, x.newest, x.slots, x.eventsAt, x.phases = got.st, got.heldFrom, got.newest, got.slots, got.eventsAt, got.phases
		x.phaseCode = make(map[string]uint8, len(got.phases))
		for i, p := range got.phases {
			x.phaseCode[p] = uint8(i)
		}
		x.lastID = in.eventID
		c.saved = in.seq
		x.log.Info("timeline index loaded from its saved copy", "copy", in.name, "bytes", len(raw), "slots", len(x.slots), "held_from", x.heldFrom)
		return true
	}
	return false
}

// saveCopyIfDue saves a copy when `every` events were folded since the
// last one (force: whenever an event was), then keeps only the newest
// timelineCopiesKept (and none ahead of it).
func (x *TimelineIndex) saveCopyIfDue(ctx context.Context, force bool) {
	c := x.copies
	if c == nil || (c.writer != nil && !c.writer()) {
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
	name := timelineCopyName(seq)
	if err != nil {
		x.log.Warn("cannot encode a copy of the timeline index; the next start folds more of the log", "copy", name, "err", err)
		return
	}
	start := time.Now()
	headers := map[string]string{}
	if lastID != "" {
		headers[timelineCopyEventHeader] = lastID
	}
	if err := c.store.PutNamed(ctx, name, headers, b); err != nil {
		if ctx.Err() != nil {
			return // shutting down: saveCopyAtShutdown saves it again
		}
		x.log.Warn("cannot save a copy of the timeline index; the next start folds more of the log", "copy", name, "err", err)
		return
	}
	x.mu.Lock()
	c.saved = max(c.saved, seq)
	x.mu.Unlock()
	x.log.Info("timeline index copy saved", "copy", name, "bytes", len(b), "took", time.Since(start).Round(time.Millisecond))
	copies, err := c.list(ctx)
	if err != nil {
		x.log.Warn("cannot list the saved timeline index copies to prune them", "err", err)
		return
	}
	kept := 0
	for _, in := range copies {
		if in.seq <= seq && kept < timelineCopiesKept {
			kept++
			continue
		}
		if err := c.store.DeleteNamed(ctx, in.name); err != nil {
			x.log.Warn("cannot delete an old timeline index copy", "copy", in.name, "err", err)
		}
	}
}

// saveCopyAtShutdown saves what was folded since the last copy, in bounded
// time, as Run ends.
func (x *TimelineIndex) saveCopyAtShutdown(ctx context.Context) {
	if x.copies == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timelineCopySaveTimeout)
	defer cancel()
	x.saveCopyIfDue(ctx, true)
}
