package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// Runner keeps the views in memory: it loads the newest snapshot, folds the
// tail of the log into it, and keeps folding as events arrive. Readers get
// one consistent State together with the stream sequence it reflects.
type Runner struct {
	store *eventlog.Store
	snaps *Snapshots
	every uint64
	log   *slog.Logger
	on    func(events.Event)
	subs  subscribers
	pubs  publishers // called under mu's write lock (publish.go)

	mu    sync.RWMutex
	state *State
	// lastEventTime is the time of the event at state.Seq (zero: unknown).
	lastEventTime time.Time
	wait          chan struct{} // closed when the state advances; nil when nobody waits

	// lastSnap is the seq of the newest snapshot saved (0: none);
	// nextSnap the seq from which the next one is due.
	lastSnap atomic.Uint64
	nextSnap atomic.Uint64
	// projs are folded beside the views (projection.go); under mu.
	projs []Projection
	// startFolded and startTarget: how far Start's fold is, of what.
	startFolded, startTarget atomic.Uint64
	refused                  atomic.Uint64
	snapping                 atomic.Bool
	started                  chan struct{}

	gaps   logGaps
	cp     runnerCheckpoints
	reader readerState
	clock  clock.Clock
	writer func() bool

	// applyMu orders the folds of the tail and of direct reads, with
	// their notifications: subscribers see every event once, in order.
	applyMu sync.Mutex
	// runCtx is Run's context, for the upkeep a fold may start (snapshots,
	// checkpoints); nil before Run.
	runCtx atomic.Pointer[context.Context]
	// directAfter: how long WaitFor waits for the tail before it reads
	// the missing events itself (directRead).
	directAfter time.Duration
	directRead  atomic.Uint64
	// directWant is the highest seq a waiter asked the direct reader for;
	// directWake wakes it (Run's goroutine, never a waiter's: the fold
	// calls OnEvent and the subscribers, which a waiter may be holding up).
	directWant atomic.Uint64
	directWake chan struct{}
}

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Snapshots, when set, are loaded at start and written every
	// SnapshotEvery events (default 10,000).
	Snapshots     *Snapshots
	SnapshotEvery uint64
	Logger        *slog.Logger
	// OnEvent, when set, is called by Run after each new event is folded,
	// outside the views' lock and before waiters are woken (metrics). It is
	// not called for the events Start folds, so a restart does not count
	// the history again. It must not block.
	OnEvent func(events.Event)
	// AcceptGaps lets the command service write even when the views were
	// built over sequences missing from the log (serve --accept-log-gaps).
	// By default such views refuse writes (WritesRefused).
	AcceptGaps bool
	// Checkpoints, when set, are taken on CheckpointPolicy's schedule and
	// are where Start begins when the log's older events expired.
	Checkpoints      *Checkpoints
	CheckpointPolicy CheckpointPolicy
	// Clock times the checkpoint schedule (default the real clock).
	Clock clock.Clock
	// Writer, when set, says whether this replica writes the snapshots
	// and the scheduled checkpoints (the leader does; followers fold only).
	Writer func() bool
	// DirectReadAfter is how long WaitFor waits for the views' reader
	// before it reads the events it waits for from the stream itself
	// (default DefaultDirectReadAfter; on Clock).
	DirectReadAfter time.Duration
}

// DefaultDirectReadAfter: the views' reader delivers an event within
// milliseconds while its consumer lives; a longer wait means the consumer
// is lost (its server died) and will be missed only after heartbeats.
const DefaultDirectReadAfter = 250 * time.Millisecond

// NewRunner returns a runner over store. Call Start, then Run.
func NewRunner(store *eventlog.Store, opts RunnerOptions) *Runner {
	if opts.SnapshotEvery == 0 {
		opts.SnapshotEvery = 10_000
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Runner{store: store, snaps: opts.Snapshots, every: opts.SnapshotEvery, log: opts.Logger, on: opts.OnEvent, state: NewState(), started: make(chan struct{})}
	r.gaps.accept = opts.AcceptGaps
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	r.cp = runnerCheckpoints{store: opts.Checkpoints, policy: opts.CheckpointPolicy, clock: opts.Clock}
	r.clock = opts.Clock
	r.nextSnap.Store(opts.SnapshotEvery)
	r.writer = opts.Writer
	r.directWake = make(chan struct{}, 1)
	r.directAfter = opts.DirectReadAfter
	if r.directAfter <= 0 {
		r.directAfter = DefaultDirectReadAfter
	}
	return r
}

// writes reports whether this replica writes snapshots and checkpoints.
func (r *Runner) writes() bool { return r.writer == nil || r.writer() }

// Start builds the views: the newest usable snapshot, then every event
// after it up to the log's end at the time of the call. A read refused at
// the stream's consumer limit is tried again until ctx ends, the reader
// down meanwhile (readAtStart); so is a first look at the log that gets no
// answer (boundsAtStart).
func (r *Runner) Start(ctx context.Context) error {
	// Held until the views are built: Register waits, so a projection
	// is either restored here or built after (runner_projections.go).
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	wait := &startWait{r: r}
	bounds, err := r.boundsAtStart(ctx, wait)
	if err != nil {
		return fmt.Errorf("projection start: %w", err)
	}
	last := bounds.Last
	if err := r.startCheckpoints(ctx); err != nil {
		// Needed only when the log is truncated, and then read again below.
		r.log.Warn("cannot list the checkpoints", "err", err)
	}
	st := NewState()
	restored := false
	var snapProblem string
	if r.snaps != nil {
		snap, parts, err := r.snaps.open(ctx)
		switch {
		case err != nil:
			snapProblem = "the snapshot is unusable: " + err.Error()
			r.log.Warn("snapshot unusable, rebuilding from the log", "err", err)
		case snap == nil:
		case snap.Seq > last:
			r.log.Warn("snapshot is ahead of the log, rebuilding from the log", "snapshot", snap.Seq, "log", last)
		case snap.Seq+1 < bounds.First:
			snapProblem = fmt.Sprintf("the snapshot ends at seq %d, before the log's first", snap.Seq)
			r.log.Warn("snapshot is older than the log's first event, starting from a checkpoint", "snapshot", snap.Seq, "firstSeq", bounds.First)
		default:
			from := r.restoreProjections(snap, parts.nextPart, bounds)
			if err := parts.finish(); err != nil {
				snapProblem = "the snapshot is unusable: " + err.Error()
				r.log.Warn("snapshot unusable, rebuilding from the log", "err", err)
				break
			}
			st, restored = from, true
			if st.Seq > 0 {
				r.lastSnap.Store(snap.Seq)
				r.nextSnap.Store(snap.Seq + r.every)
				r.log.Info("loaded snapshot", "seq", snap.Seq)
			}
		}
	}
	var lastTime time.Time
	if st.Seq+1 < bounds.First {
		// The events before the log's first expired: a fold from here
		// would lack them (claims created before would vanish).
		cst, cp, err := r.cp.store.coveringCheckpoint(ctx, bounds, nil)
		var te *TruncatedLogError
		if errors.As(err, &te) {
			te.Why = joinWhy(snapProblem, te.Why)
		}
		if err != nil {
			return fmt.Errorf("projection start: %w", err)
		}
		st, lastTime, restored = cst, cp.Time, false
		r.log.Info("loaded checkpoint: the log's older events expired", "seq", cp.Seq, "firstSeq", bounds.First, "lastEvent", cp.Time.Format(time.RFC3339))
	}
	if !restored {
		// Checkpoints hold the views alone.
		st = r.restoreProjections(st, nil, bounds)
	}
	begin := time.Now()
	from := st.Seq + 1
	// The views' own read is never refused for the reads clients hold,
	// and waits out a consumer limit held by others (readAtStart).
	r.startTarget.Store(last)
	err = r.readAtStart(ctx, wait, func() uint64 { return st.Seq + 1 }, last, func(e events.Event) error {
		r.fold(st, e)
		for _, p := range r.projs {
			p.Apply(st, e)
		}
		r.startFolded.Store(e.Seq)
		lastTime = e.Time
		return nil
	})
	if gaps := eventlog.GapsOf(err); gaps != nil {
		// The views hold every event the log delivered; what it did not
		// is reported, and decides whether they may serve writes.
		r.noteGaps(gaps, "start")
		err = nil
	}
	if err != nil {
		return fmt.Errorf("projection catch-up from %d: %w", from, err)
	}
	r.checkStreamDamage(ctx, st.Seq)
	r.mu.Lock()
	r.state, r.lastEventTime = st, lastTime
	r.pubs.publish(st, nil)
	r.mu.Unlock()
	r.log.Info("views built", "seq", st.Seq, "events", st.Seq-from+1, "took", time.Since(begin).Round(time.Millisecond))
	close(r.started)
	return nil
}

// Run folds new events until ctx ends, surviving failures of its reader
// of the log. Start must have returned first.
func (r *Runner) Run(ctx context.Context) error {
	<-r.started
	r.runCtx.Store(&ctx)
	defer r.runCtx.Store(nil)
	var direct sync.WaitGroup
	defer direct.Wait()
	direct.Go(func() { r.directReader(ctx) })
	r.runCheckpointTicker(ctx)
	// A failed reader is re-created (runner_recovery.go): Run ends only
	// with ctx.
	return r.tailRecovering(ctx, r.clock, func(e events.Event) error {
		r.apply(e, false)
		return nil
	})
}

// apply folds one event after the views' last, notifies, and wakes the
// waiters; direct: the event came from a direct read (counted). An event
// the views hold already (the tail delivering what a direct read folded)
// is passed over.
func (r *Runner) apply(e events.Event, direct bool) {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.Lock()
	if e.Seq <= r.state.Seq {
		r.mu.Unlock()
		return
	}
	if e.Seq > r.state.Seq+1 {
		r.noteGaps(eventlog.Gaps{{First: r.state.Seq + 1, Last: e.Seq - 1}}, "tail")
	}
	r.fold(r.state, e)
	for _, p := range r.projs {
		p.Apply(r.state, e)
	}
	if direct {
		r.directRead.Add(1)
	}
	r.lastEventTime = e.Time
	r.pubs.publish(r.state, &e)
	w := r.wait
	r.wait = nil
	seq := r.state.Seq
	r.mu.Unlock()
	if r.on != nil {
		r.on(e)
	}
	r.subs.notify(e)
	if w != nil {
		close(w)
	}
	ctx := r.runCtx.Load()
	if ctx == nil {
		return
	}
	if r.snaps != nil && seq >= r.nextSnap.Load() && r.writes() {
		r.snapshotAsync(*ctx)
	}
	r.maybeCheckpoint(*ctx)
}

// readDirect folds the events after the views' last up to seq that the
// stream answers by direct gets, so a waiter is not held by a reader
// whose consumer is lost (found only after missed heartbeats, and made
// again only through JetStream's meta leader). It folds no event past a
// hole: the tail reports gaps.
func (r *Runner) readDirect(ctx context.Context, seq uint64) {
	from := r.ReadTo() + 1
	if from > seq {
		return
	}
	_, err := r.store.ReadDirect(ctx, from, seq, func(e events.Event) error {
		r.apply(e, true)
		return nil
	})
	if err != nil && ctx.Err() == nil {
		r.log.Debug("views: direct read of the log failed; waiting for the reader", "from", from, "to", seq, "err", err)
	}
}

// directReader reads directly what waiters ask for (askDirect), one read
// at a time, until ctx ends.
func (r *Runner) directReader(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.directWake:
			r.readDirect(ctx, r.directWant.Load())
		}
	}
}

// askDirect asks the direct reader for the events up to seq.
func (r *Runner) askDirect(seq uint64) {
	for {
		cur := r.directWant.Load()
		if seq <= cur || r.directWant.CompareAndSwap(cur, seq) {
			break
		}
	}
	select {
	case r.directWake <- struct{}{}:
	default:
	}
}

// DirectRead counts the events the views folded from direct reads because
// their reader had not delivered them in time (metric).
func (r *Runner) DirectRead() uint64 { return r.directRead.Load() }

func (r *Runner) fold(st *State, e events.Event) {
	if err := Evolve(st, e); err != nil {
		r.refused.Add(1)
		r.log.Warn("event refused by the model", "err", err)
	}
}

// Read calls fn with the current views. fn must not keep or change them:
// they are shared with every other reader until fn returns.
func (r *Runner) Read(fn func(*State)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn(r.state)
}

// Seq is the sequence of the last event the views reflect.
func (r *Runner) Seq() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.state.Seq
}

// Refused counts the events the model refused since start (metric
// claimstream_events_refused_total): each is a line "event refused by the
// model" in the log; a run of them usually follows a gap in the log.
func (r *Runner) Refused() uint64 { return r.refused.Load() }

// SnapshotSeq is the seq of the newest snapshot saved or loaded (0: none).
func (r *Runner) SnapshotSeq() uint64 { return r.lastSnap.Load() }

// WaitFor blocks until the views reflect seq or ctx ends. Events the
// reader has not delivered after DirectReadAfter are read from the stream
// directly (readDirect).
func (r *Runner) WaitFor(ctx context.Context, seq uint64) error {
	var direct clock.Timer
	defer func() {
		if direct != nil {
			direct.Stop()
		}
	}()
	for {
		r.mu.Lock()
		if r.readToLocked() >= seq {
			r.mu.Unlock()
			return nil
		}
		if r.wait == nil {
			r.wait = make(chan struct{})
		}
		w := r.wait
		r.mu.Unlock()
		if direct == nil {
			direct = r.clock.NewTimer(r.directAfter)
		}
		select {
		case <-w:
		case <-direct.C():
			// Only beside a running reader: views that were built and
			// not run, or stopped, stay where they are.
			if r.runCtx.Load() != nil {
				r.askDirect(seq)
			}
			direct.Reset(r.directAfter)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the views to reach seq %d: %w", seq, ctx.Err())
		}
	}
}

// Changed returns a channel closed at the next change of the views.
func (r *Runner) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wait == nil {
		r.wait = make(chan struct{})
	}
	return r.wait
}

// CaughtUp reports whether the views reflect the whole log as of now, with
// the log's last sequence.
func (r *Runner) CaughtUp(ctx context.Context) (bool, uint64, error) {
	last, err := r.store.LastSeq(ctx)
	if err != nil {
		return false, 0, err
	}
	// A reader that is down misses whatever comes next: not current.
	return r.ReadTo() >= last && !r.ReaderStatus().Down, last, nil
}

// ReadinessFoldWait is how long /readyz and gRPC health let the views fold
// the events appended just before the check (CaughtUpWithin): well under
// the chart's probe timeout of 5 s.
const ReadinessFoldWait = time.Second

// CaughtUpWithin is CaughtUp for readiness: views behind the log's last
// sequence get up to wait (a request's deadline, not the runner's clock)
// to fold it. Under churn an event appended a moment before the check is
// almost always unfolded, and CaughtUp alone made /readyz and gRPC health
// flap at 100 claims a second; views that cannot reach the log's end in
// wait (a start, a failover, a reader that stopped) are still not current.
func (r *Runner) CaughtUpWithin(ctx context.Context, wait time.Duration) (bool, uint64, error) {
	ok, last, err := r.CaughtUp(ctx)
	if err != nil || ok || r.ReaderStatus().Down {
		return ok, last, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if r.WaitFor(wctx, last) != nil {
		return false, last, ctx.Err()
	}
	return !r.ReaderStatus().Down, last, nil
}

// ReadTo is the sequence the views have read the log to: Seq, or past it
// when the sequences after Seq are known to be missing (a truncated log
// ends in lost events; the views cannot wait for them).
func (r *Runner) ReadTo() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.readToLocked()
}

func (r *Runner) readToLocked() uint64 {
	pos := r.state.Seq
	for _, g := range r.Gaps() {
		if g.First <= pos+1 && g.Last > pos {
			pos = g.Last
		}
	}
	return pos
}

// SnapshotNow writes a snapshot of the current views.
func (r *Runner) SnapshotNow(ctx context.Context) error {
	if r.snaps == nil {
		return errors.New("no snapshot store configured")
	}
	r.mu.RLock()
	b, seq, err := r.storedLocked()
	r.mu.RUnlock()
	if err != nil {
		return err
	}
	if gaps := r.Gaps(); len(gaps) > 0 {
		return fmt.Errorf("no snapshot of views built over a gap (%s): the next start must see the gap again", gaps)
	}
	if err := r.snaps.save(ctx, b, seq); err != nil {
		return err
	}
	r.lastSnap.Store(seq)
	r.nextSnap.Store(seq + r.every)
	return nil
}

func (r *Runner) snapshotAsync(ctx context.Context) {
	if !r.snapping.CompareAndSwap(false, true) {
		return
	}
	if gaps := r.Gaps(); len(gaps) > 0 {
		// A snapshot past the gap would hide it from the next start.
		r.snapping.Store(false)
		r.nextSnap.Store(r.Seq() + r.every)
		r.log.Warn("not writing a snapshot of views built over a gap in the log", "missing", gaps.String())
		return
	}
	// A read lock keeps the fold out while the views are encoded.
	r.mu.RLock()
	b, seq, err := r.storedLocked()
	r.mu.RUnlock()
	if err != nil {
		r.snapping.Store(false)
		r.nextSnap.Store(seq + r.every)
		r.log.Error("encode snapshot", "err", err)
		return
	}
	go func() {
		// The watermark moves only once the snapshot is saved; a failed
		// save is tried again after another SnapshotEvery events.
		err := r.snaps.save(ctx, b, seq)
		if err != nil {
			r.nextSnap.Store(seq + r.every)
			if ctx.Err() == nil {
				r.log.Error("write snapshot failed, trying again later", "seq", seq, "retryAt", seq+r.every, "err", err)
			}
		} else {
			r.lastSnap.Store(seq)
			r.nextSnap.Store(seq + r.every)
		}
		r.snapping.Store(false)
		// Events that arrived while this one was written may already be
		// due for the next.
		if ctx.Err() == nil && r.Seq() >= r.nextSnap.Load() {
			r.snapshotAsync(ctx)
		}
	}()
}

// Rebuild folds the log from its first event up to seq upTo (0: its end)
// into a new State. It is the reference the incremental views must equal,
// and the replay of the pool as it was at any past point.
func Rebuild(ctx context.Context, store *eventlog.Store, upTo uint64) (*State, error) {
	st := NewState()
	err := store.Read(ctx, 1, upTo, func(e events.Event) error {
		_ = Evolve(st, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// RebuildUntil folds every event whose time is at or before t.
func RebuildUntil(ctx context.Context, store *eventlog.Store, t time.Time) (*State, error) {
	st := NewState()
	stop := errors.New("stop")
	err := store.Read(ctx, 1, 0, func(e events.Event) error {
		if e.Data != nil && e.Time.After(t) {
			return stop
		}
		_ = Evolve(st, e)
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return nil, err
	}
	return st, nil
}
