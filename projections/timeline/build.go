package timeline

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// MaxWindow bounds the window of one timeline request: the fold
// behind it reads every event of the window.
const MaxWindow = 31 * 24 * time.Hour

// DefaultWindow is the window when ?since= is not given.
const DefaultWindow = time.Hour

// barPhases are the phases a timeline bar takes, by index: the slot
// phases of the views, and "failed" for a slot that is off after its last
// claim failed (it rests before its next attempt).
var barPhases = []string{
	string(projections.SlotOff), string(projections.SlotPending), string(projections.SlotBooting),
	string(projections.SlotReady), string(projections.SlotDraining), "failed", string(projections.SlotDecommissioned),
}

// Timeline is the compact body of GET /api/v1/timeline: each slot's phases
// over a window as intervals (not events), for a browser to draw 1,000
// rows of a week at once. Times are milliseconds from Since; tables
// (Groups, Claims, Reasons, Phases) are indexed to keep the payload small.
type Timeline struct {
	Since string `json:"since"`
	Until string `json:"until"`
	// Seq is the last event folded; Events counts those in the window.
	Seq    uint64 `json:"seq"`
	Events int    `json:"events"`
	// Phases names the phase indexes of Bars.
	Phases []string `json:"phases"`
	Groups []string `json:"groups"`
	// Slots are the rows, sorted by group then name; SlotGroups[i] is the
	// index in Groups of Slots[i].
	Slots      []string `json:"slots"`
	SlotGroups []int    `json:"slotGroups"`
	Claims     []string `json:"claims"`
	Reasons    []string `json:"reasons"`
	// Bars are flat quintuples (slot, start, end, phase, claim): one phase
	// interval of a slot; claim is -1 for none. Off intervals are left out
	// (a row's background is off).
	Bars []int64 `json:"bars"`
	// Failures are flat quadruples (slot, at, claim, reason): each claim
	// that failed in the window.
	Failures []int64 `json:"failures"`
}

// timelineBuilder folds the log over a window and cuts each slot's phases
// into intervals.
type timelineBuilder struct {
	since, until time.Time
	out          Timeline
	slotIdx      map[string]int
	claimIdx     map[string]int
	reasonIdx    map[string]int
	phaseIdx     map[string]int
	// open is, per slot index, the interval being drawn.
	open []openBar
	// rows holds the bars per slot before they are renumbered by row order.
	rows [][]int64
	fail [][]int64
}

type openBar struct {
	start int64
	phase int
	claim int
}

func newTimelineBuilder(since, until time.Time) *timelineBuilder {
	b := &timelineBuilder{since: since, until: until, slotIdx: map[string]int{}, claimIdx: map[string]int{}, reasonIdx: map[string]int{}, phaseIdx: map[string]int{}}
	for i, p := range barPhases {
		b.phaseIdx[p] = i
	}
	b.out.Phases = barPhases
	return b
}

func (b *timelineBuilder) ms(t time.Time) int64 {
	if t.Before(b.since) {
		return 0
	}
	return t.Sub(b.since).Milliseconds()
}

func intern(m map[string]int, list *[]string, name string) int {
	if i, ok := m[name]; ok {
		return i
	}
	m[name] = len(*list)
	*list = append(*list, name)
	return m[name]
}

// timelinePhase is the phase a slot's row shows: the views' derived phase,
// with an off slot whose last claim failed shown as failed.
func timelinePhase(st *projections.State, slot string) (phase, claim string) {
	sl := st.Slots[slot]
	if sl == nil {
		return string(projections.SlotOff), ""
	}
	p := st.SlotPhase(slot)
	if live := st.LiveOfSlot(slot); live != nil {
		return string(p), live.Name
	}
	if p == projections.SlotOff && sl.LastClaim != nil && sl.LastClaim.Phase == projections.PhaseFailed {
		return "failed", sl.LastClaim.Claim
	}
	return string(p), ""
}

// observe records slot's phase at t: it closes the open interval when the
// phase or the claim changed.
func (b *timelineBuilder) observe(st *projections.State, slot string, t time.Time) {
	if sl := st.Slots[slot]; sl == nil || sl.Retired {
		if i, ok := b.slotIdx[slot]; ok {
			b.close(i, t)
			b.open[i] = openBar{phase: -1}
		}
		return
	}
	i, ok := b.slotIdx[slot]
	if !ok {
		i = intern(b.slotIdx, &b.out.Slots, slot)
		b.open = append(b.open, openBar{phase: -1})
		b.rows = append(b.rows, nil)
		b.fail = append(b.fail, nil)
	}
	phase, claim := timelinePhase(st, slot)
	p := b.phaseIdx[phase]
	c := -1
	if claim != "" {
		c = intern(b.claimIdx, &b.out.Claims, claim)
	}
	if o := b.open[i]; o.phase == p && o.claim == c {
		return
	}
	b.close(i, t)
	b.open[i] = openBar{start: b.ms(t), phase: p, claim: c}
}

func (b *timelineBuilder) close(i int, t time.Time) {
	o := b.open[i]
	if o.phase < 0 || o.phase == b.phaseIdx[string(projections.SlotOff)] {
		return
	}
	if end := b.ms(t); end > o.start {
		b.rows[i] = append(b.rows[i], int64(i), o.start, end, int64(o.phase), int64(o.claim))
	}
}

// finish closes every open interval at end, orders the rows by group then
// name and flattens them.
func (b *timelineBuilder) finish(st *projections.State, end time.Time) Timeline {
	for i := range b.open {
		b.close(i, end)
	}
	groupOf := map[string]string{}
	for name, sl := range st.Slots {
		groupOf[name] = sl.Group
	}
	order := make([]int, len(b.out.Slots))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(x, y int) bool {
		a, c := b.out.Slots[order[x]], b.out.Slots[order[y]]
		if groupOf[a] != groupOf[c] {
			return groupOf[a] < groupOf[c]
		}
		return a < c
	})
	out := b.out
	out.Slots = make([]string, len(order))
	out.SlotGroups = make([]int, len(order))
	out.Bars, out.Failures = []int64{}, []int64{}
	groupIdx := map[string]int{}
	for row, i := range order {
		name := b.out.Slots[i]
		out.Slots[row] = name
		out.SlotGroups[row] = intern(groupIdx, &out.Groups, groupOf[name])
		for k := 0; k < len(b.rows[i]); k += 5 {
			out.Bars = append(out.Bars, int64(row), b.rows[i][k+1], b.rows[i][k+2], b.rows[i][k+3], b.rows[i][k+4])
		}
		for k := 0; k < len(b.fail[i]); k += 4 {
			out.Failures = append(out.Failures, int64(row), b.fail[i][k+1], b.fail[i][k+2], b.fail[i][k+3])
		}
	}
	if out.Groups == nil {
		out.Groups = []string{}
	}
	if out.Claims == nil {
		out.Claims = []string{}
	}
	if out.Reasons == nil {
		out.Reasons = []string{}
	}
	return out
}

// Build folds the log into the views as they were at since (the
// code behind replay --at: the nearest checkpoint, then the tail), then
// folds every event up to until, cutting each slot's phases into
// intervals. end is when the still-open intervals stop (until, or now if
// sooner).
func Build(ctx context.Context, store *eventlog.Store, cps *projections.Checkpoints, since, until, end time.Time) (Timeline, error) {
	st, err := projections.ReplayUntil(ctx, store, cps, since)
	if err != nil {
		return Timeline{}, err
	}
	b := newTimelineBuilder(since, until)
	for _, name := range slices.Sorted(maps.Keys(st.Slots)) {
		b.observe(st, name, since)
	}
	stop := errors.New("stop")
	err = store.Read(ctx, st.Seq+1, 0, func(e events.Event) error {
		if e.Data != nil && e.Time.After(until) {
			return stop
		}
		_ = projections.Evolve(st, e)
		b.out.Events++
		slot := ""
		if e.Aggregate.Kind == events.KindSlot {
			slot = e.Aggregate.Name
		} else if e.Data != nil {
			slot = e.Data.Reference().Slot
		}
		if slot == "" {
			return nil
		}
		b.observe(st, slot, e.Time)
		if e.Type == events.TypeClaimFailed {
			if i, ok := b.slotIdx[slot]; ok {
				ref := e.Data.Reference()
				reason := "failed"
				if c := st.Claims[ref.Claim]; c != nil && c.Reason != "" {
					reason = c.Reason
				}
				b.fail[i] = append(b.fail[i], int64(i), b.ms(e.Time), int64(intern(b.claimIdx, &b.out.Claims, ref.Claim)), int64(intern(b.reasonIdx, &b.out.Reasons, reason)))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return Timeline{}, err
	}
	if end.After(until) {
		end = until
	}
	out := b.finish(st, end)
	out.Seq = st.Seq
	out.Since, out.Until = since.UTC().Format(time.RFC3339Nano), until.UTC().Format(time.RFC3339Nano)
	return out, nil
}
