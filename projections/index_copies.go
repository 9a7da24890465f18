package projections

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventlog"
)

// IndexCopies are the saved copies of one of serve's in-memory indexes (the
// cost index, the timeline index), kept in the checkpoint bucket beside the
// views' checkpoints as <prefix><seq>: a start continues from the newest
// copy the log still reaches instead of reading the log, and a save keeps
// only the newest copiesKept. Each index encodes and decodes its own bytes;
// IndexCopies names, lists, loads, saves and prunes them.
type IndexCopies struct {
	what   string // "cost index": what the log lines name
	prefix string
	// eventHeader holds the ID of the last event the copy folded: a copy
	// whose event the log holds with another ID belongs to another log (a
	// restore of another backup).
	eventHeader string
	store       *Checkpoints
	every       uint64
	// writer, when set, says whether this replica writes the copies (the
	// leader, as for the views' checkpoints).
	writer func() bool
	onSave func(outcome string)
	log    *slog.Logger
	// saved is the seq of the newest copy written or loaded (atomic: a
	// request's catch-up may load one while the index's Run saves).
	saved atomic.Uint64
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

// NewIndexCopies keeps the copies of the index named what (as log lines
// name it) in cps as <prefix><seq>; eventHeader is the object header that
// holds the ID of the copy's last event.
func NewIndexCopies(what, prefix, eventHeader string, cps *Checkpoints, o CopyOptions, log *slog.Logger) *IndexCopies {
	if o.Every == 0 {
		o.Every = copyEveryDefault
	}
	if o.OnSave == nil {
		o.OnSave = func(string) {}
	}
	return &IndexCopies{what: what, prefix: prefix, eventHeader: eventHeader, store: cps, every: o.Every, writer: o.Writer, onSave: o.OnSave, log: log}
}

// Name is the name of the copy at seq.
func (c *IndexCopies) Name(seq uint64) string { return CopyName(c.prefix, seq) }

// CopyName is the name of the copy at seq: the seq in 20 digits, so that the
// bucket's names sort as the seqs do.
func CopyName(prefix string, seq uint64) string { return fmt.Sprintf("%s%020d", prefix, seq) }

// Writes reports whether this replica saves copies.
func (c *IndexCopies) Writes() bool { return c.writer == nil || c.writer() }

// Saved is the seq of the newest copy written or loaded.
func (c *IndexCopies) Saved() uint64 { return c.saved.Load() }

// SetSaved records seq as the newest copy written or loaded.
func (c *IndexCopies) SetSaved(seq uint64) { c.saved.Store(seq) }

// Soon reports whether a copy may be due at seq: force, or `every` events
// folded since the last copy.
func (c *IndexCopies) Soon(seq uint64, force bool) bool {
	return force || seq >= c.saved.Load()+c.every
}

// Due reports whether a copy of an index at seq is due: it folded an
// event since the last copy, and (unless force) `every` of them.
func (c *IndexCopies) Due(seq uint64, force bool) bool {
	saved := c.saved.Load()
	return seq > saved && (force || seq-saved >= c.every)
}

// SavedCopy is one copy in the bucket: its name, the seq of its last event
// and that event's ID ("" when not recorded).
type SavedCopy struct {
	Name    string
	Seq     uint64
	EventID string
}

// list lists the saved copies, newest first.
func (c *IndexCopies) list(ctx context.Context) ([]SavedCopy, error) {
	infos, err := c.store.obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the checkpoint bucket: %w", err)
	}
	var out []SavedCopy
	for _, in := range infos {
		if !strings.HasPrefix(in.Name, c.prefix) {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimPrefix(in.Name, c.prefix), 10, 64)
		if err != nil {
			continue // not one of ours
		}
		out = append(out, SavedCopy{Name: in.Name, Seq: seq, EventID: in.Headers.Get(c.eventHeader)})
	}
	slices.SortFunc(out, func(a, b SavedCopy) int { return cmp.Compare(b.Seq, a.Seq) })
	return out, nil
}

// put stores b as the copy name, with headers, in the checkpoint bucket
// (and its replicas). name must not start with the views' checkpoint
// prefix.
func (c *IndexCopies) put(ctx context.Context, name string, headers map[string]string, b []byte) error {
	if strings.HasPrefix(name, checkpointPrefix) {
		return fmt.Errorf("object %s: the prefix %s is the views' checkpoints'", name, checkpointPrefix)
	}
	h := map[string][]string{}
	for k, v := range headers {
		h[k] = []string{v}
	}
	if _, err := c.store.obj.Put(ctx, jetstream.ObjectMeta{Name: name, Headers: h}, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("write %s to the checkpoint bucket: %w", name, err)
	}
	return nil
}

// remove deletes the copy name from the checkpoint bucket.
func (c *IndexCopies) remove(ctx context.Context, name string) error {
	if err := c.store.obj.Delete(ctx, name); err != nil {
		return fmt.Errorf("delete %s from the checkpoint bucket: %w", name, err)
	}
	return nil
}

// maxCopySize bounds what read holds in memory at once.
const maxCopySize = 1 << 30

// read reads the copy name into one buffer of its size (the object
// store's GetBytes grows its buffer by doubling: for a copy of tens of MB
// that is twice its size in garbage at start).
func (c *IndexCopies) read(ctx context.Context, name string) ([]byte, error) {
	r, err := c.store.obj.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %w", name, err)
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %w", name, err)
	}
	if info.Size > maxCopySize {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %d bytes, more than %d", name, info.Size, maxCopySize)
	}
	b := make([]byte, info.Size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %w", name, err)
	}
	// The reader checks the object's digest when it reaches the end.
	n, err := r.Read(make([]byte, 1))
	if n != 0 {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: longer than its size, %d bytes", name, info.Size)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %w", name, err)
	}
	return b, nil
}

// Load hands use the newest saved copy the log continues and returns it.
// A copy ahead of the log's last event, one that ends before the log's
// first (when first > 0: the events between expired), one whose last event
// the log holds under another ID, one that cannot be read and one use
// refuses as damaged (damaged: the error's text names the damage) are each
// reported in one line and passed over for the next older one; with none
// left, false.
func (c *IndexCopies) Load(ctx context.Context, store *eventlog.Store, last, first uint64, use func(in SavedCopy, raw []byte) error, damaged error) (SavedCopy, bool) {
	copies, err := c.list(ctx)
	if err != nil {
		c.log.Warn(fmt.Sprintf("cannot list the saved %s copies; building the %s from the log", c.what, c.what), "err", err)
		return SavedCopy{}, false
	}
	for _, in := range copies {
		if in.Seq > last {
			c.log.Warn(fmt.Sprintf("%s copy %s is ahead of the event log, which ends at seq %d (restored from an older backup?); ignoring it", c.what, in.Name, last))
			continue
		}
		if first > 0 && in.Seq+1 < first {
			c.log.Warn(fmt.Sprintf("%s copy %s ends before the event log's first event (seq %d; the events between expired); ignoring it", c.what, in.Name, first))
			continue
		}
		if in.EventID != "" {
			e, err := store.Get(ctx, in.Seq)
			if err == nil && e.ID != in.EventID {
				c.log.Warn(fmt.Sprintf("%s copy %s does not match the event log (its event at seq %d has another id; restored from another backup?); ignoring it", c.what, in.Name, in.Seq))
				continue
			}
		}
		raw, err := c.read(ctx, in.Name)
		if err != nil {
			c.log.Warn(fmt.Sprintf("%s copy %s cannot be read; trying an older copy or the log", c.what, in.Name), "err", err)
			continue
		}
		if err := use(in, raw); err != nil {
			c.log.Warn(fmt.Sprintf("%s copy %s is damaged (%s); trying an older copy or the log", c.what, in.Name, strings.TrimPrefix(err.Error(), damaged.Error()+": ")))
			continue
		}
		c.log.Info(c.what+" loaded from its saved copy", "copy", in.Name, "bytes", len(raw))
		return in, true
	}
	return SavedCopy{}, false
}

// Save writes b, the copy of the index at seq whose last event is lastID,
// then keeps only the newest copiesKept (and none ahead of it). It reports
// whether the copy was written.
func (c *IndexCopies) Save(ctx context.Context, seq uint64, lastID string, b []byte) bool {
	start := time.Now()
	name := c.Name(seq)
	headers := map[string]string{}
	if lastID != "" {
		headers[c.eventHeader] = lastID
	}
	if err := c.put(ctx, name, headers, b); err != nil {
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
		if in.Seq <= seq && kept < copiesKept {
			kept++
			continue
		}
		if err := c.remove(ctx, in.Name); err != nil {
			c.log.Warn(fmt.Sprintf("cannot delete an old %s copy", c.what), "copy", in.Name, "err", err)
		}
	}
	return true
}

// SaveAtShutdown runs save (an index's save of what it folded since its
// last copy) in bounded time past the end of ctx, as the index's Run ends.
func (c *IndexCopies) SaveAtShutdown(ctx context.Context, save func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), copySaveTimeout)
	defer cancel()
	save(ctx)
}
