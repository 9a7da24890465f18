package cost

import (
	"slices"
	"time"

	"github.com/claimstream/claimstream/events"
)

// Unclaimed is the requester and claim of machine time no live claim holds.
const Unclaimed = "unclaimed"

// Why an up machine stayed up although no claim wanted it (Row.Unwanted).
const (
	// ReasonNoClaim: no live claim on the slot, and the input law's
	// shutdown has not landed (or the slot declares no shutdown Job).
	ReasonNoClaim = "no-claim"
	// ReasonInputLawPause: the input law paused after its bound of
	// shutdowns that did not power the machine off (UnclaimedShutdownPaused).
	ReasonInputLawPause = "input-law-pause"
	// ReasonDrain: the slot's claim was marked for scale-down and its
	// machine is being drained and shut down.
	ReasonDrain = "drain"
	// ReasonShutdownRefused: the scale-down fired its bound of shutdown Jobs
	// and the machine stayed up (ShutdownAttemptLimitReached).
	ReasonShutdownRefused = "shutdown-refused"
)

// Reasons lists the reasons in report order.
var Reasons = []string{ReasonNoClaim, ReasonInputLawPause, ReasonDrain, ReasonShutdownRefused}

// Fold is the state of the cost accounting, folded from the log in order
// (Apply). It holds no clock: the instants are the events' own (the power
// facts' At, the others' time). A Fold is not safe for concurrent use.
type Fold struct {
	dim   Dimension
	since time.Time
	until time.Time

	groups map[string]*groupState
	slots  map[string]*slotState
	claims map[string]*claimState
	// order is the slots in the order the fold met them: a report sums
	// their open intervals in it, so its figures are the same on every
	// call (a sum's rounding depends on its order).
	order []*slotState

	rows map[rowKey]*acc
	// prices are the prices segments name, each held once (ratesRef).
	prices map[rates]*rates
	// rec, when set, takes the fold's accruals and counted boots instead
	// of rows: an Index keeps them to report any window later.
	rec *Index
	// hint, when set, holds the row of the attribution being added (nil:
	// not found yet); an Index's report sets it per span (rowHint).
	hint **acc
}

type groupState struct {
	spec  events.GroupSpec
	slots map[string]*slotState
}

type claimState struct {
	name, requester string
	slot            *slotState
	booting         bool
	scaleDown       bool
	refused         bool
}

type slotState struct {
	name  string
	group string
	cost  *events.Cost // the slot's overrides
	rates rates        // the group's prices with the overrides
	gone  bool         // retired, or its group retired: no longer observed
	live  *claimState
	// pausedUntil: the input law's pause (UnclaimedShutdownPaused).
	pausedUntil time.Time

	on      bool
	powerAt time.Time
	// segs are the slot's attributions from powerAt on, oldest first; the
	// first is in force at powerAt.
	segs []segment
}

// NewFold starts an empty fold that accrues [since, until) by dim. A zero
// until is open: Report takes its end.
func NewFold(dim Dimension, since, until time.Time) *Fold {
	return &Fold{
		dim: dim, since: since, until: until,
		groups: map[string]*groupState{}, slots: map[string]*slotState{}, claims: map[string]*claimState{},
		rows: map[rowKey]*acc{},
	}
}

func (f *Fold) group(name string) *groupState {
	g := f.groups[name]
	if g == nil {
		g = &groupState{slots: map[string]*slotState{}}
		f.groups[name] = g
	}
	return g
}

func (f *Fold) groupSpec(name string) events.GroupSpec {
	if g := f.groups[name]; g != nil {
		return g.spec
	}
	return events.GroupSpec{}
}

func (f *Fold) slot(name, group string) *slotState {
	s := f.slots[name]
	if s == nil {
		s = &slotState{name: name, group: group, rates: ratesOf(f.groupSpec(group), nil)}
		f.slots[name] = s
		f.order = append(f.order, s)
		if group != "" {
			f.group(group).slots[name] = s
		}
	}
	return s
}

// Apply folds one event. Events of other types, and events that name
// nothing the fold knows, change nothing: an older or newer log still
// folds. Most types need only the event's Ref (read without copying the
// whole payload: a million events a report).
func (f *Fold) Apply(e events.Event) {
	if e.Data == nil {
		return
	}
	t := e.Time
	switch typ := e.Data.EventType(); typ {
	case events.TypeGroupDeclared:
		d := e.Data.(events.GroupDeclared)
		f.setGroup(d.Group, d.Spec, t)
	case events.TypeGroupChanged:
		d := e.Data.(events.GroupChanged)
		f.setGroup(d.Group, d.Spec, t)
	case events.TypeGroupRetired:
		// In the order the fold met the slots, not the map's: the sums are
		// then made in one order, whoever folds (an Index, a report).
		g := f.group(e.Data.Reference().Group)
		for _, s := range f.order {
			if g.slots[s.name] == s {
				f.stop(s, t)
			}
		}
	case events.TypeSlotDeclared:
		d := e.Data.(events.SlotDeclared)
		f.setSlot(d.Slot, d.Group, d.Spec.Cost, t)
	case events.TypeSlotChanged:
		d := e.Data.(events.SlotChanged)
		f.setSlot(d.Slot, d.Group, d.Spec.Cost, t)
	case events.TypeSlotRetired:
		r := e.Data.Reference()
		f.stop(f.slot(r.Slot, r.Group), t)
	case events.TypeClaimCreated:
		d := e.Data.(events.ClaimCreated)
		s := f.slot(d.Slot, d.Group)
		if s.live != nil {
			delete(f.claims, s.live.name) // superseded
		}
		c := &claimState{name: d.Claim, requester: d.RequestedBy, slot: s}
		if c.requester == "" {
			c.requester = "unknown"
		}
		f.claims[d.Claim] = c
		s.live = c
		f.touch(s, t)
	case events.TypeClaimBooting:
		if c := f.claims[e.Data.Reference().Claim]; c != nil {
			c.booting = true
			f.count(c, t, false)
			f.touch(c.slot, t)
		}
	case events.TypeClaimReady:
		if c := f.claims[e.Data.Reference().Claim]; c != nil {
			c.booting = false
			f.touch(c.slot, t)
		}
	case events.TypeClaimFailed:
		claim := e.Data.Reference().Claim
		if c := f.claims[claim]; c != nil && c.booting {
			f.count(c, t, true)
		}
		f.end(claim, t)
	case events.TypeClaimCancelled, events.TypeClaimCompleted, events.TypeClaimSuperseded:
		f.end(e.Data.Reference().Claim, t)
	case events.TypeScaleDownRequested:
		if c := f.claims[e.Data.Reference().Claim]; c != nil {
			c.scaleDown = true
			f.touch(c.slot, t)
		}
	case events.TypeShutdownFired:
		r := e.Data.Reference()
		s := f.slot(r.Slot, r.Group)
		s.pausedUntil = time.Time{}
		if c := f.claims[r.Claim]; c != nil {
			c.refused = false
		}
		f.touch(s, t)
	case events.TypeShutdownAttemptLimitReached:
		if c := f.claims[e.Data.Reference().Claim]; c != nil {
			c.refused = true
			f.touch(c.slot, t)
		}
	case events.TypeUnclaimedShutdownPaused:
		d := e.Data.(events.UnclaimedShutdownPaused)
		s := f.slot(d.Slot, d.Group)
		s.pausedUntil = d.PausedUntil
		f.touch(s, t)
	case events.TypeMachinePoweredOn:
		d := e.Data.(events.MachinePoweredOn)
		f.power(f.slot(d.Slot, d.Group), true, d.At, t)
	case events.TypeMachinePoweredOff:
		d := e.Data.(events.MachinePoweredOff)
		f.power(f.slot(d.Slot, d.Group), false, d.At, t)
	}
}

func (f *Fold) setGroup(name string, spec events.GroupSpec, t time.Time) {
	g := f.group(name)
	g.spec = spec
	for _, s := range g.slots {
		s.rates = ratesOf(spec, s.cost)
		f.touch(s, t)
	}
}

func (f *Fold) setSlot(name, group string, c *events.Cost, t time.Time) {
	s := f.slot(name, group)
	if s.group != group {
		if s.group != "" {
			delete(f.group(s.group).slots, name)
		}
		s.group = group
		f.group(group).slots[name] = s
	}
	s.cost, s.gone = c, false
	s.rates = ratesOf(f.groupSpec(group), c)
	f.touch(s, t)
}

// end: a claim is terminal; its slot has no live claim from t.
func (f *Fold) end(claim string, t time.Time) {
	c := f.claims[claim]
	if c == nil {
		return
	}
	delete(f.claims, claim)
	if c.slot.live == c {
		c.slot.live = nil
		f.touch(c.slot, t)
	}
}

// stop: the slot left the pool (or its group did); nothing observes its
// machine any more, so its time stops counting at t.
func (f *Fold) stop(s *slotState, t time.Time) {
	if s.on {
		f.power(s, false, t, t)
	}
	s.gone = true
}

// power records a power fact: the slot's time since its last fact accrues
// at the old state, and the new state starts at at. A fact earlier than
// the last one (it cannot be, as written) is taken at the last one's time.
func (f *Fold) power(s *slotState, on bool, at, t time.Time) {
	if at.Before(s.powerAt) {
		at = s.powerAt
	}
	if at.After(t) {
		at = t
	}
	if len(s.segs) == 0 {
		s.segs = append(s.segs, f.segmentOf(s, f.attribution(s), nanos(at)))
	}
	f.accrue(s, s.on, s.powerAt, at, f.rows)
	// Keep the attribution in force at at and those after it.
	i := 0
	for i+1 < len(s.segs) && s.segs[i+1].from <= nanos(at) {
		i++
	}
	s.segs = append(s.segs[:0], s.segs[i:]...)
	s.segs[0].from = nanos(at)
	s.on, s.powerAt = on, at
	if f.rec != nil && cap(s.segs) > 2*len(s.segs) {
		// A long-lived fold (an Index's) keeps 10,000 slots' segments:
		// give back what the last interval's attributions took.
		s.segs = slices.Clone(s.segs)
	}
}
