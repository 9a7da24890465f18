package timeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/internal/claimname"
	"github.com/claimstream/claimstream/projections"
)

// Index keeps each slot's phase intervals of the log in memory, so a
// timeline request cuts a window out of them instead of folding the window's
// events (a fold grows with the window's events, a cut with the slots shown).
// It folds the log into its own views up to the views' runner, then follows
// the runner's folds and lets its own views go (follow.go); a
// request first applies whatever Run has not yet. Intervals that ended more
// than MaxWindow before the newest event are dropped; a window that
// reaches before what the index holds is folded from the log (Build).
type Index struct {
	store *eventlog.Store
	cps   *projections.Checkpoints
	log   *slog.Logger

	mu sync.Mutex
	// st is the index's own views while it builds; nil once it follows the
	// views' runner (feed). seq is the last event folded or followed.
	st  *projections.State
	seq uint64
	// ok: the index is built; broken says why it cannot be (a log whose
	// start expired: requests fold from the log instead).
	ok     bool
	broken error
	// heldFrom is the earliest instant the index answers for (zero: the
	// log's start).
	heldFrom time.Time
	newest   time.Time
	slots    map[string]*slotLine
	// eventsAt is the time (Unix ms) of each folded event, for the counts.
	eventsAt instants
	// phases names the codes of indexBar.phase; phaseCode is its inverse.
	phases    []string
	phaseCode map[string]uint8

	// copies, when set, are the saved copies of the index a start
	// continues from (KeepCopies, copies.go); lastID is the
	// ID of the last event folded.
	copies *projections.IndexCopies
	lastID string

	// views and feed, set by Run: the runner the index follows once built,
	// and its records; feedEpoch is the feed's epoch when following began.
	views     *projections.Runner
	feed      *timelineFeed
	feedEpoch uint64

	// firstBuild is closed once the first build ended, built or not.
	firstBuild     chan struct{}
	firstBuildOnce sync.Once
}

// slotLine is one slot's history. It is held for as long as serve runs,
// for every slot and a month of claims (hundreds of thousands of
// intervals at 10,000 slots), so its closed intervals are a stream of
// varints (barStream: 6 to 10 bytes each), its phase a code of
// Index.phases and its claim an index into the slot's claims, each
// name held once (in 4 bytes when it is the slot's name and a suffix, as
// claims are named).
type slotLine struct {
	name     string
	group    string
	declared time.Time
	retired  time.Time // zero while in the pool
	bars     barStream // closed intervals (bars.go)
	open     indexBar  // phase noPhase when none
	// claims are the claims of bars and open, in order.
	claims claimname.Names
	fails  []indexFail
}

type indexBar struct {
	start, end int64 // Unix nanoseconds
	claim      int32 // index into slotLine.claims; -1: none
	phase      uint8 // code of Index.phases
}

// noPhase is the phase code of no open interval.
const noPhase = 0

// noBar is a slot's open interval when it has none.
var noBar = indexBar{claim: -1, phase: noPhase}

type indexFail struct {
	at            time.Time
	claim, reason string
}

// NewIndex indexes store's log; cps (may be nil) serve the
// windows the index no longer holds. log (default slog's) is told when the
// index cannot follow the log.
func NewIndex(store *eventlog.Store, cps *projections.Checkpoints, log *slog.Logger) *Index {
	if log == nil {
		log = slog.Default()
	}
	x := &Index{store: store, cps: cps, log: log, firstBuild: make(chan struct{})}
	x.reset()
	return x
}

// reset empties the index, to be built again.
func (x *Index) reset() {
	x.ok, x.st, x.seq, x.lastID = false, nil, 0, ""
	x.heldFrom, x.newest = time.Time{}, time.Time{}
	x.slots, x.eventsAt = map[string]*slotLine{}, instants{}
	// Code 0 is no phase; the views' phases get theirs as they are seen.
	x.phases, x.phaseCode = []string{""}, map[string]uint8{"": noPhase}
}

// Run keeps the index current until ctx ends: it folds the log now, then
// each batch of new events as views announces them.
func (x *Index) Run(ctx context.Context, views *projections.Runner) error {
	defer x.followViews(views)()
	return projections.Follow(ctx, views, projections.Follower{
		CatchUp:  x.catchUp,
		Copies:   x.copies,
		SaveCopy: x.saveCopyIfDue,
		Failing: func(err error) {
			// Requests fold their window from the log meanwhile.
			x.log.Warn("timeline index cannot follow the log; timelines are folded from the log per request", "err", err)
		},
		Recovered: func() { x.log.Info("timeline index follows the log again") },
	})
}

// FirstBuild is closed once the index's first build (from a saved copy,
// a checkpoint or the log) ended, whether it succeeded or not.
func (x *Index) FirstBuild() <-chan struct{} { return x.firstBuild }

// catchUp folds the events the index has not seen yet.
func (x *Index) catchUp(ctx context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	defer x.firstBuildOnce.Do(func() { close(x.firstBuild) })
	if x.broken != nil {
		return x.broken
	}
	if x.following() {
		if x.applyFeed() {
			x.prune()
			return nil
		}
		x.log.Warn("timeline index lost its place in the views' folds (views replaced, or too far behind); building it again from a saved copy or the log")
		x.reset()
	}
	building, fromCopy := !x.ok, false
	if !x.ok && x.copies != nil {
		// A saved copy the log continues: only the events after it are
		// folded.
		b, err := x.store.Bounds(ctx)
		if err != nil {
			return err
		}
		fromCopy = x.loadCopy(ctx, b)
		x.ok = fromCopy
	}
	if !x.ok {
		// The views before the log's first event: empty, or a checkpoint
		// when the log's start expired (then the index starts there), or
		// one older than any window, so a long log is not folded from its
		// start to keep its last month.
		b, err := x.store.Bounds(ctx)
		if err != nil {
			return err
		}
		if b.Truncated() {
			st, cp, err := x.cps.OldestCovering(ctx, b)
			if err != nil || st == nil {
				x.broken = fmt.Errorf("the log's start expired and no checkpoint holds it: %v", err)
				x.stopFeed()
				return x.broken
			}
			x.st, x.heldFrom = st, cp.Time
		} else if st, cp := x.checkpointBeforeAnyWindow(ctx, b); st != nil {
			x.st, x.heldFrom = st, cp.Time
		} else {
			x.st = projections.NewState()
		}
		x.seq = x.st.Seq
		for name := range x.st.Slots {
			x.observe(name, slotStateOf(x.st, name), x.heldFrom)
		}
		x.ok = true
	}
	last, err := x.store.LastSeq(ctx)
	if err != nil {
		return err
	}
	if last <= x.seq {
		x.startFollowing()
		return nil
	}
	began, from, folded := time.Now(), x.seq+1, 0
	err = x.store.Read(ctx, x.seq+1, last, func(e events.Event) error {
		x.fold(e)
		folded++
		return nil
	})
	if gaps := eventlog.GapsOf(err); gaps != nil {
		// Folded around the gap, as the views are; the timeline shows
		// what the log holds.
		err = nil
	}
	x.prune()
	if building && err == nil {
		x.log.Info("timeline index built", "from_seq", from, "events_folded", folded, "held_from", x.heldFrom, "took", time.Since(began).Round(time.Millisecond), "from_copy", fromCopy)
	}
	if err == nil {
		x.startFollowing()
	}
	return err
}

// checkpointBeforeAnyWindow loads the newest checkpoint older than any
// window the index answers (MaxWindow and a default window before
// the newest checkpoint, so before the newest event too), for a log of
// bounds b. It returns a nil state when there is none, or when the
// checkpoints cannot be read (then the index folds the log from its
// start, as it would without them).
func (x *Index) checkpointBeforeAnyWindow(ctx context.Context, b eventlog.Bounds) (*projections.State, projections.CheckpointInfo) {
	if x.cps == nil {
		return nil, projections.CheckpointInfo{}
	}
	cps, err := x.cps.List(ctx)
	if err != nil {
		x.log.Warn("timeline index: the checkpoints cannot be listed; folding the log from its start", "err", err)
		return nil, projections.CheckpointInfo{}
	}
	if len(cps) == 0 {
		return nil, projections.CheckpointInfo{}
	}
	newest := cps[len(cps)-1].Time
	for i := len(cps) - 1; i >= 0; i-- {
		cp := cps[i]
		if cp.Seq > b.Last || cp.Time.Add(MaxWindow+DefaultWindow).After(newest) {
			continue
		}
		st, err := x.cps.Load(ctx, cp.Seq)
		if err != nil {
			x.log.Warn("timeline index: a checkpoint cannot be read; folding the log from its start", "seq", cp.Seq, "err", err)
			return nil, projections.CheckpointInfo{}
		}
		return st, cp
	}
	return nil, projections.CheckpointInfo{}
}

// fold folds e into the index's own views and applies what it changed.
func (x *Index) fold(e events.Event) {
	_ = projections.Evolve(x.st, e)
	x.st.Seq = max(x.st.Seq, e.Seq)
	r := recordOf(x.st, e)
	x.apply(&r)
}

// timelineRecord is what the index takes of one folded event: the views
// right after it, as far as a timeline shows them. The index's own folds
// and the views' runner (follow.go) both make them, so the
// index applies one thing whichever views it follows.
type timelineRecord struct {
	seq  uint64
	id   string
	at   time.Time
	slot string // "" when the event names none
	slotState
	// failed: a ClaimFailed event, of failedClaim, for failReason.
	failed                  bool
	failedClaim, failReason string
}

// slotState is what a timeline shows of a slot in views.
type slotState struct {
	present      bool // declared and not retired
	group        string
	phase, claim string
}

func slotStateOf(st *projections.State, slot string) slotState {
	sl := st.Slots[slot]
	if sl == nil {
		return slotState{}
	}
	s := slotState{group: sl.Group}
	if !sl.Retired {
		s.present = true
		s.phase, s.claim = timelinePhase(st, slot)
	}
	return s
}

// recordOf is the record of e, given the views st right after it.
func recordOf(st *projections.State, e events.Event) timelineRecord {
	r := timelineRecord{seq: e.Seq, id: e.ID, at: e.Time}
	if e.Aggregate.Kind == events.KindSlot {
		r.slot = e.Aggregate.Name
	} else if e.Data != nil {
		r.slot = e.Data.Reference().Slot
	}
	if r.slot == "" {
		return r
	}
	r.slotState = slotStateOf(st, r.slot)
	if e.Type == events.TypeClaimFailed && e.Data != nil {
		ref := e.Data.Reference()
		r.failed, r.failedClaim, r.failReason = true, ref.Claim, "failed"
		if c := st.Claims[ref.Claim]; c != nil && c.Reason != "" {
			r.failReason = c.Reason
		}
	}
	return r
}

// apply adds one record to the index.
func (x *Index) apply(r *timelineRecord) {
	x.seq = max(x.seq, r.seq)
	if r.at.After(x.newest) {
		x.newest = r.at
	}
	x.eventsAt.add(r.at.UnixMilli())
	x.lastID = r.id
	if r.slot == "" {
		return
	}
	x.observe(r.slot, r.slotState, r.at)
	if r.failed {
		if l := x.slots[r.slot]; l != nil {
			l.fails = append(l.fails, indexFail{at: r.at, claim: r.failedClaim, reason: r.failReason})
		}
	}
}

// observe records slot's phase at t, as timelineBuilder.observe does.
func (x *Index) observe(slot string, s slotState, t time.Time) {
	l := x.slots[slot]
	if l != nil && s.group != "" {
		l.group = s.group
	}
	if !s.present {
		if l != nil && l.retired.IsZero() {
			x.close(l, t)
			l.retired = t
		}
		return
	}
	if l == nil {
		l = &slotLine{name: slot, group: s.group, declared: t, open: noBar}
		x.slots[slot] = l
	} else if !l.retired.IsZero() {
		l.retired = time.Time{} // declared again
	}
	phaseName, claim := s.phase, s.claim
	phase := x.code(phaseName)
	if l.open.phase == phase && l.isClaim(l.open, claim) {
		return
	}
	x.close(l, t)
	l.open = indexBar{start: t.UnixNano(), phase: phase, claim: l.claimIndex(claim)}
}

// code is the phase code of name, given on first sight.
func (x *Index) code(name string) uint8 {
	c, ok := x.phaseCode[name]
	if !ok {
		c = uint8(len(x.phases)) // a handful of phases: barPhases and the views'
		x.phases = append(x.phases, name)
		x.phaseCode[name] = c
	}
	return c
}

// close ends l's open interval at t, keeping it unless it was off.
func (x *Index) close(l *slotLine, t time.Time) {
	o := l.open
	if name := x.phases[o.phase]; name != "" && name != string(projections.SlotOff) && t.UnixNano() > o.start {
		o.end = t.UnixNano()
		l.bars.add(o)
	}
	l.open = noBar
}

// claimOf is the claim of b ("" for none).
func (l *slotLine) claimOf(b indexBar) string {
	if b.claim < 0 {
		return ""
	}
	return l.claims.At(l.name, int(b.claim))
}

// isClaim says whether b's claim is claim ("" for none), without making
// its name.
func (l *slotLine) isClaim(b indexBar, claim string) bool {
	if b.claim < 0 {
		return claim == ""
	}
	return l.claims.Is(l.name, int(b.claim), claim)
}

// claimIndex is the index of claim in l.claims, added if it is not the
// last one (a slot's claims come one after the other); -1 for none.
func (l *slotLine) claimIndex(claim string) int32 {
	if claim == "" {
		return -1
	}
	if n := l.claims.Len(); n > 0 && l.claims.Is(l.name, n-1, claim) {
		return int32(n - 1)
	}
	l.claims.Append(l.name, claim)
	return int32(l.claims.Len() - 1)
}

// prune drops what ended more than MaxWindow before the newest
// event: no window can reach it (older windows fold from the log).
func (x *Index) prune() {
	cut := x.newest.Add(-MaxWindow - DefaultWindow)
	if !cut.After(x.heldFrom) {
		return
	}
	cutNs := cut.UnixNano()
	for name, l := range x.slots {
		if !l.retired.IsZero() && l.retired.Before(cut) {
			delete(x.slots, name)
			continue
		}
		if (l.bars.n > 0 && l.bars.firstEnd <= cutNs) || (l.bars.n == 0 && l.claims.Len() > 0) {
			l.dropBefore(cutNs)
		}
		j := sort.Search(len(l.fails), func(j int) bool { return l.fails[j].at.After(cut) })
		l.fails = trimmed(l.fails, j)
	}
	x.eventsAt.dropThrough(cut.UnixMilli())
	x.heldFrom = cut
}

// trimmed is s without its first i elements. It copies (so the dropped
// ones are freed) only when it drops some or when s holds much more room
// than it uses: prune runs after every batch of events, and copying every
// slot's history each time would be most of the index's work.
func trimmed[T any](s []T, i int) []T {
	if i == 0 && cap(s) <= len(s)+len(s)/4+8 {
		return s
	}
	return append(s[:0:0], s[i:]...)
}

// errNotHeld: the window reaches before what the index holds.
var errNotHeld = errors.New("window not held")

// Timeline cuts the window [since, until) out of the index, open
// intervals ending at end (or until, if sooner).
func (x *Index) Timeline(ctx context.Context, since, until, end time.Time) (Timeline, error) {
	if err := x.catchUp(ctx); err != nil {
		return Timeline{}, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cut(since, until, end)
}

// cut is Timeline of what the index holds now; the caller holds x.mu.
func (x *Index) cut(since, until, end time.Time) (Timeline, error) {
	if since.Before(x.heldFrom) {
		return Timeline{}, errNotHeld
	}
	if end.After(until) {
		end = until
	}
	b := newTimelineBuilder(since, until)
	names := make([]string, 0, len(x.slots))
	for name, l := range x.slots {
		// A row for every slot in the pool at some point of the window.
		if l.declared.After(until) || (!l.retired.IsZero() && !l.retired.After(since)) {
			continue
		}
		names = append(names, name)
	}
	group := func(name string) string { return x.slots[name].group }
	sort.Slice(names, func(i, j int) bool {
		if gi, gj := group(names[i]), group(names[j]); gi != gj {
			return gi < gj
		}
		return names[i] < names[j]
	})
	out := &b.out
	out.Slots = names
	out.SlotGroups = make([]int, len(names))
	out.Bars, out.Failures = []int64{}, []int64{}
	groupIdx := map[string]int{}
	emit := func(l *slotLine, row int, br indexBar, stop time.Time) {
		s, e := time.Unix(0, br.start).UTC(), stop
		if s.Before(since) {
			s = since
		}
		if e.After(until) {
			e = until
		}
		if !e.After(s) {
			return
		}
		c := -1
		if claim := l.claimOf(br); claim != "" {
			c = intern(b.claimIdx, &out.Claims, claim)
		}
		out.Bars = append(out.Bars, int64(row), b.ms(s), b.ms(e), int64(b.phaseIdx[x.phases[br.phase]]), int64(c))
	}
	for row, name := range names {
		l := x.slots[name]
		out.SlotGroups[row] = intern(groupIdx, &out.Groups, group(name))
		sinceNs, untilNs := since.UnixNano(), until.UnixNano()
		for br := range l.bars.all() {
			if br.end <= sinceNs {
				continue
			}
			if br.start >= untilNs {
				break
			}
			emit(l, row, br, time.Unix(0, br.end).UTC())
		}
		if o := l.open; o.phase != noPhase && x.phases[o.phase] != string(projections.SlotOff) && o.start < untilNs {
			emit(l, row, o, end)
		}
		j := sort.Search(len(l.fails), func(j int) bool { return l.fails[j].at.After(since) })
		for ; j < len(l.fails) && !l.fails[j].at.After(until); j++ {
			f := l.fails[j]
			out.Failures = append(out.Failures, int64(row), b.ms(f.at), int64(intern(b.claimIdx, &out.Claims, f.claim)), int64(intern(b.reasonIdx, &out.Reasons, f.reason)))
		}
	}
	out.Events = x.eventsAt.count(since.UnixMilli(), until.UnixMilli())
	out.Seq = x.seq
	if out.Groups == nil {
		out.Groups = []string{}
	}
	if out.Claims == nil {
		out.Claims = []string{}
	}
	if out.Reasons == nil {
		out.Reasons = []string{}
	}
	out.Since, out.Until = since.UTC().Format(time.RFC3339Nano), until.UTC().Format(time.RFC3339Nano)
	return *out, nil
}
