package rest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// savedCopies are the saved copies of one of serve's in-memory indexes (the
// cost index, the timeline index), kept in the checkpoint bucket beside the
// views' checkpoints as <prefix><seq>: a start continues from the newest
// copy the log still reaches instead of reading the log, and a save keeps
// only the newest copiesKept.
type savedCopies struct {
	what   string // "cost index": what the log lines name
	prefix string
	// eventHeader holds the ID of the last event the copy folded: a copy
	// whose event the log holds with another ID belongs to another log (a
	// restore of another backup).
	eventHeader string
	store       *projections.Checkpoints
	every       uint64
	// writer, when set, says whether this replica writes the copies (the
	// leader, as for the views' checkpoints).
	writer func() bool
	onSave func(outcome string)
	log    *slog.Logger
}

const (
	// copiesKept: the newest copy, and the one before it should the newest
	// turn out damaged.
	copiesKept = 2
	// copySaveTimeout bounds the save at shutdown.
	copySaveTimeout = 5 * time.Second
	// copyEveryDefault is how many events apart copies are saved by default.
	copyEveryDefault = 10_000
)

// CopyOptions say how an index keeps its saved copies (KeepCopies).
type CopyOptions struct {
	// Every is how many events apart copies are saved (0: 10,000); one is
	// saved at a clean shutdown too.
	Every uint64
	// Writer (nil: always) says whether this replica writes them (the
	// leader, as for the views' checkpoints).
	Writer func() bool
	// OnSave, when set, is told of every save: "saved" or "failed".
	OnSave func(outcome string)
}

func newSavedCopies(what, prefix, eventHeader string, cps *projections.Checkpoints, o CopyOptions, log *slog.Logger) *savedCopies {
	if o.Every == 0 {
		o.Every = copyEveryDefault
	}
	if o.OnSave == nil {
		o.OnSave = func(string) {}
	}
	return &savedCopies{what: what, prefix: prefix, eventHeader: eventHeader, store: cps, every: o.Every, writer: o.Writer, onSave: o.OnSave, log: log}
}

func (c *savedCopies) name(seq uint64) string { return copyName(c.prefix, seq) }

// copyName is the name of the copy at seq: the seq in 20 digits, so that the
// bucket's names sort as the seqs do.
func copyName(prefix string, seq uint64) string { return fmt.Sprintf("%s%020d", prefix, seq) }

// writes reports whether this replica saves copies.
func (c *savedCopies) writes() bool { return c.writer == nil || c.writer() }

type savedCopy struct {
	name    string
	seq     uint64
	eventID string
}

// list lists the saved copies, newest first.
func (c *savedCopies) list(ctx context.Context) ([]savedCopy, error) {
	objs, err := c.store.ListNamed(ctx, c.prefix)
	if err != nil {
		return nil, err
	}
	var out []savedCopy
	for _, o := range objs {
		seq, err := strconv.ParseUint(strings.TrimPrefix(o.Name, c.prefix), 10, 64)
		if err != nil {
			continue // not one of ours
		}
		out = append(out, savedCopy{name: o.Name, seq: seq, eventID: o.Headers[c.eventHeader]})
	}
	slices.SortFunc(out, func(a, b savedCopy) int { return cmp.Compare(b.seq, a.seq) })
	return out, nil
}

// load hands use the newest saved copy the log continues and returns it.
// A copy ahead of the log's last event, one that ends before the log's
// first (when first > 0: the events between expired), one whose last event
// the log holds under another ID, one that cannot be read and one use
// refuses as damaged (damaged: the error's text names the damage) are each
// reported in one line and passed over for the next older one; with none
// left, false.
func (c *savedCopies) load(ctx context.Context, store *eventlog.Store, last, first uint64, use func(in savedCopy, raw []byte) error, damaged error) (savedCopy, bool) {
	copies, err := c.list(ctx)
	if err != nil {
		c.log.Warn(fmt.Sprintf("cannot list the saved %s copies; building the %s from the log", c.what, c.what), "err", err)
		return savedCopy{}, false
	}
	for _, in := range copies {
		if in.seq > last {
			c.log.Warn(fmt.Sprintf("%s copy %s is ahead of the event log, which ends at seq %d (restored from an older backup?); ignoring it", c.what, in.name, last))
			continue
		}
		if first > 0 && in.seq+1 < first {
			c.log.Warn(fmt.Sprintf("%s copy %s ends before the event log's first event (seq %d; the events between expired); ignoring it", c.what, in.name, first))
			continue
		}
		if in.eventID != "" {
			e, err := store.Get(ctx, in.seq)
			if err == nil && e.ID != in.eventID {
				c.log.Warn(fmt.Sprintf("%s copy %s does not match the event log (its event at seq %d has another id; restored from another backup?); ignoring it", c.what, in.name, in.seq))
				continue
			}
		}
		raw, err := c.store.GetNamed(ctx, in.name)
		if err != nil {
			c.log.Warn(fmt.Sprintf("%s copy %s cannot be read; trying an older copy or the log", c.what, in.name), "err", err)
			continue
		}
		if err := use(in, raw); err != nil {
			c.log.Warn(fmt.Sprintf("%s copy %s is damaged (%s); trying an older copy or the log", c.what, in.name, strings.TrimPrefix(err.Error(), damaged.Error()+": ")))
			continue
		}
		c.log.Info(c.what+" loaded from its saved copy", "copy", in.name, "bytes", len(raw))
		return in, true
	}
	return savedCopy{}, false
}

// save writes b, the copy of the index at seq whose last event is lastID,
// then keeps only the newest copiesKept (and none ahead of it). It reports
// whether the copy was written.
func (c *savedCopies) save(ctx context.Context, seq uint64, lastID string, b []byte) bool {
	start := time.Now()
	name := c.name(seq)
	headers := map[string]string{}
	if lastID != "" {
		headers[c.eventHeader] = lastID
	}
	if err := c.store.PutNamed(ctx, name, headers, b); err != nil {
		if ctx.Err() == nil { // shutting down: the shutdown's save tries again
			c.log.Warn(fmt.Sprintf("cannot save a copy of the %s; the next start folds more of the log", c.what), "copy", name, "err", err)
			c.onSave("failed")
		}
		return false
	}
	c.onSave("saved")
	c.log.Info(c.what+" copy saved", "copy", name, "bytes", len(b), "took", time.Since(start).Round(time.Millisecond))
	copies, err := c.list(ctx)
	if err != nil {
		c.log.Warn(fmt.Sprintf("cannot list the saved %s copies to prune them", c.what), "err", err)
		return true
	}
	kept := 0
	for _, in := range copies {
		if in.seq <= seq && kept < copiesKept {
			kept++
			continue
		}
		if err := c.store.DeleteNamed(ctx, in.name); err != nil {
			c.log.Warn(fmt.Sprintf("cannot delete an old %s copy", c.what), "copy", in.name, "err", err)
		}
	}
	return true
}

// shutdownContext bounds the save at shutdown, past the end of ctx.
func shutdownContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), copySaveTimeout)
}
