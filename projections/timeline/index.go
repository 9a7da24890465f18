package timeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/internal/claimname"
	"github.com/claimstream/claimstream/projections"
)

// Index keeps each slot's phase intervals of the log in memory, so a
// timeline request cuts a window out of them instead of folding the window's
// events (a fold grows with the window's events, a cut with the slots shown).
// It is a projection of the views' runner: the runner hands it a record of
// each event it folds, taken from the views right after the fold, and
// saves it in the views' snapshots. Intervals that ended more than
// MaxWindow before the newest event are dropped; a window that reaches
// before what the index holds is folded from the log (Build).
type Index struct {
	views *projections.Runner
	store *eventlog.Store
	// history takes the full chunks of eventsAt (instants.go), for the
	// index's life; nil holds them in memory (noFile says why, when the
	// file could not be made).
	history *chunkfile.File
	noFile  error
	// lastHistory is what History found last.
	lastHistory atomic.Pointer[chunkfile.Usage]

	// pending holds the records of the events the views folded that the
	// index has not applied yet (a request held mu). beginPending: the
	// next event begins the index (beginAtNext).
	pending      projections.Handover[timelineRecord]
	beginPending atomic.Bool

	mu  sync.Mutex
	seq uint64
	// heldFrom is the earliest instant the index answers for (zero: the
	// log's start); beginAtNext: it begins at the next event, with the
	// slots as the views hold them then (restored without its part over
	// views with a history).
	heldFrom    time.Time
	beginAtNext bool
	newest      time.Time
	// prunedAt is the newest event's time at the last prune.
	prunedAt time.Time
	slots    map[string]*slotLine
	// eventsAt is the time (Unix ms) of each folded event, for the counts.
	eventsAt instants
	// phases names the codes of indexBar.phase; phaseCode is its inverse.
	phases    []string
	phaseCode map[string]uint8
}

// projectionName keys the index's part of the views' snapshots.
const projectionName = "timeline"

// pruneEvery is how much newer the newest event must be than at the last
// prune for the next (prune walks every slot).
const pruneEvery = 6 * time.Hour

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

// NewIndex keeps a timeline index of store's log folded by views: call it
// before views.Start (or the index is built from the log first; the views
// log why it begins without history, if it does). The events' instants
// go to an unlinked file in historyDir (serve's data dir), or stay in
// memory when historyDir is "".
func NewIndex(ctx context.Context, views *projections.Runner, store *eventlog.Store, historyDir string) (*Index, error) {
	x := &Index{views: views, store: store}
	if historyDir != "" {
		x.history, x.noFile = chunkfile.Open(historyDir, "timeline")
	}
	x.reset()
	if err := views.Register(ctx, x); err != nil {
		if x.history != nil {
			_ = x.history.Close()
		}
		return nil, err
	}
	return x, nil
}

// History says where the index holds the full chunks of its events'
// instants, and why in memory when they belong on disk. It never waits
// for the index's lock (a timeline request or a snapshot may hold it for
// long, and /readyz asks): it then says what it found last.
func (x *Index) History() chunkfile.Usage {
	if !x.mu.TryLock() {
		if u := x.lastHistory.Load(); u != nil {
			return *u
		}
		return chunkfile.Usage{Err: x.noFile}
	}
	defer x.mu.Unlock()
	u := chunkfile.Usage{InMemory: x.eventsAt.inMemory(), Err: x.eventsAt.err}
	if x.history != nil {
		u.OnDisk = x.history.Size()
	}
	if u.Err == nil {
		u.Err = x.noFile
	}
	x.lastHistory.Store(&u)
	return u
}

// reset empties the index; the caller holds mu.
func (x *Index) reset() {
	x.seq, x.beginAtNext = 0, false
	x.heldFrom, x.newest, x.prunedAt = time.Time{}, time.Time{}, time.Time{}
	x.eventsAt.release()
	x.slots, x.eventsAt = map[string]*slotLine{}, instants{history: x.history}
	// Code 0 is no phase; the views' phases get theirs as they are seen.
	x.phases, x.phaseCode = []string{""}, map[string]uint8{"": noPhase}
}

// Name is the index's part of a snapshot (projections.Projection).
func (x *Index) Name() string { return projectionName }

// Restore begins the index at the views st (projections.Projection).
func (x *Index) Restore(st *projections.State, part projections.Part) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	begin := false
	defer func() {
		x.pending.Reset()
		x.beginPending.Store(begin)
	}()
	x.reset()
	x.seq = st.Seq
	begin = st.Seq > 0 && part == nil
	if part == nil {
		if st.Seq > 0 {
			// Windows before the next event are folded from the log.
			x.beginAtNext = true
			x.heldFrom = endOfTime
		}
		return nil
	}
	c, err := unmarshalTimelineFrom(part, part.Len(), x.history)
	if err == nil && c.seq != st.Seq {
		c.eventsAt.release()
		err = fmt.Errorf("%w: it covers seq %d, the views %d", errCopyDamaged, c.seq, st.Seq)
	}
	if err != nil {
		begin = st.Seq > 0
		x.beginAtNext, x.heldFrom = begin, endOfTime
		return err
	}
	x.heldFrom, x.newest, x.slots, x.eventsAt, x.phases = c.heldFrom, c.newest, c.slots, c.eventsAt, c.phases
	x.prunedAt = x.newest
	for name, l := range x.slots {
		if sl := st.Slots[name]; sl != nil {
			l.group = sl.Group
		}
	}
	x.phaseCode = make(map[string]uint8, len(c.phases))
	for i, p := range c.phases {
		x.phaseCode[p] = uint8(i)
	}
	return nil
}

// endOfTime: held from no instant yet.
var endOfTime = time.Unix(1<<62, 0)

// Apply hands over a record of e, taken from the views st right after
// they folded it (projections.Projection): it runs under the views'
// lock, so it applies the records only when no request holds the index.
func (x *Index) Apply(st *projections.State, e events.Event) {
	var records []timelineRecord
	if x.beginPending.CompareAndSwap(true, false) {
		// The views as they are now begin the index.
		for name := range st.Slots {
			records = append(records, timelineRecord{seq: e.Seq, at: e.Time, slot: name, slotState: slotStateOf(st, name), observation: true})
		}
	}
	x.pending.Put(&x.mu, x.applyLocked, append(records, recordOf(st, e))...)
}

// applyPendingLocked applies the records waiting; the caller holds mu.
func (x *Index) applyPendingLocked() { x.pending.Drain(x.applyLocked) }

// applyLocked applies records handed over; the caller holds mu.
func (x *Index) applyLocked(records []timelineRecord) {
	for i := range records {
		x.apply(&records[i])
	}
	if x.newest.Sub(x.prunedAt) >= pruneEvery {
		x.prune()
		x.prunedAt = x.newest
	}
}

// WritePart writes the index's part of a snapshot to w
// (projections.Projection).
func (x *Index) WritePart(w io.Writer) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.applyPendingLocked()
	return x.write(w)
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
	// observation: no event, the slot as the views held it when the
	// index began.
	observation bool
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

// apply adds one record to the index; the caller holds mu.
func (x *Index) apply(r *timelineRecord) {
	if r.seq <= x.seq && !r.observation {
		return
	}
	if x.beginAtNext {
		x.beginAtNext, x.heldFrom = false, r.at
	}
	if r.observation {
		x.observe(r.slot, r.slotState, r.at)
		return
	}
	x.seq = r.seq
	if r.at.After(x.newest) {
		x.newest = r.at
	}
	x.eventsAt.add(r.at.UnixMilli())
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
// intervals ending at end (or until, if sooner), over every event
// appended before the call.
func (x *Index) Timeline(ctx context.Context, since, until, end time.Time) (Timeline, error) {
	if _, _, done := x.views.StartProgress(); !done {
		return Timeline{}, errBuilding
	}
	last, err := x.store.LastSeq(ctx)
	if err != nil {
		return Timeline{}, fmt.Errorf("timeline index: the log's last event: %w", err)
	}
	if err := x.views.WaitFor(ctx, last); err != nil {
		return Timeline{}, fmt.Errorf("timeline index: %w", err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.applyPendingLocked()
	return x.cut(since, until, end)
}

// errBuilding: the views, and the index with them, are being built.
var errBuilding = errors.New("the timeline index is being built")

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
	events, err := x.eventsAt.count(since.UnixMilli(), until.UnixMilli())
	if err != nil {
		return Timeline{}, err
	}
	out.Events = events
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
