package cost

import (
	"time"

	"github.com/claimstream/claimstream/events"
)

// attribution is who a second of a slot's machine belongs to and what it
// costs: the slot's group, its live claim (none: Unclaimed), whether that
// claim is booting, why the machine is up although unwanted, and the
// prices in force.
type attribution struct {
	group     string
	slot      string
	claim     string
	requester string
	booting   bool
	unwanted  string
	// pausedUntil ends an input-law pause inside a segment: past it the
	// reason is ReasonNoClaim again (the pause ends by the clock, not by
	// an event).
	pausedUntil time.Time
	rates       rates
}

// rates are a machine's prices, per second and per joule.
type rates struct {
	currency       string
	perSecond      float64
	upWatts        float64
	bootWatts      float64
	energyPerJoule float64
}

func ratesOf(g events.GroupSpec, slot *events.Cost) rates {
	c := events.EffectiveCost(g, slot)
	r := rates{
		currency:       c.Currency,
		perSecond:      events.Num(c.PricePerHour) / 3600,
		upWatts:        events.Num(c.PowerWatts),
		energyPerJoule: events.Num(c.EnergyPricePerKWh) / 3.6e6,
	}
	r.bootWatts = r.upWatts
	if c.BootWatts != nil {
		r.bootWatts = *c.BootWatts
	}
	return r
}

// segment is an attribution in force from an instant until the next
// segment's. An Index's fold keeps every slot's from its last power fact
// on, so it holds what differs between them compactly: instants as Unix
// nanoseconds (nanos), the reason as a code, the prices shared (the
// fold's ratesRef); the slot is the one whose segments they are.
type segment struct {
	from                    int64
	group, claim, requester string
	pausedUntil             int64
	rates                   *rates
	booting                 bool
	// unwanted is 0 for none, else 1 + its index in Reasons (reasonCode).
	unwanted uint8
}

// segmentOf is a as a segment of slot s from the instant from.
func (f *Fold) segmentOf(s *slotState, a attribution, from int64) segment {
	return segment{from: from, group: a.group, claim: a.claim, requester: a.requester, pausedUntil: nanos(a.pausedUntil),
		rates: f.ratesRef(s, a.rates), booting: a.booting, unwanted: reasonCode(a.unwanted)}
}

// reasonCode is a reason as a segment holds it (segment.unwanted).
func reasonCode(reason string) uint8 {
	if reason == "" {
		return 0
	}
	return uint8(reasonIndex(reason)) + 1
}

// attribution is the segment's attribution, of slot.
func (g *segment) attribution(slot string) attribution {
	a := attribution{group: g.group, slot: slot, claim: g.claim, requester: g.requester, booting: g.booting,
		pausedUntil: fromNanos(g.pausedUntil), rates: *g.rates}
	if g.unwanted > 0 {
		a.unwanted = Reasons[g.unwanted-1]
	}
	return a
}

// is reports whether the segment holds attribution a (of its slot).
func (g *segment) is(a attribution) bool {
	return g.group == a.group && g.claim == a.claim && g.requester == a.requester && g.booting == a.booting &&
		g.pausedUntil == nanos(a.pausedUntil) && *g.rates == a.rates && g.unwanted == reasonCode(a.unwanted)
}

// ratesRef is r, shared by every segment that names the same prices: as
// a rule the slot's last segment's.
func (f *Fold) ratesRef(s *slotState, r rates) *rates {
	if n := len(s.segs); n > 0 && *s.segs[n-1].rates == r {
		return s.segs[n-1].rates
	}
	if p, ok := f.prices[r]; ok {
		return p
	}
	p := new(rates) // not &r: r would be moved to the heap on every call
	*p = r
	if r == r { // a NaN price is never found again: not kept
		if f.prices == nil {
			f.prices = map[rates]*rates{}
		}
		f.prices[r] = p
	}
	return p
}

func (f *Fold) attribution(s *slotState) attribution {
	a := attribution{group: s.group, slot: s.name, claim: Unclaimed, requester: Unclaimed, rates: s.rates}
	switch c := s.live; {
	case c != nil:
		a.claim, a.requester, a.booting = c.name, c.requester, c.booting
		switch {
		case c.refused:
			a.unwanted = ReasonShutdownRefused
		case c.scaleDown:
			a.unwanted = ReasonDrain
		}
	case !s.pausedUntil.IsZero():
		a.unwanted, a.pausedUntil = ReasonInputLawPause, s.pausedUntil
	default:
		a.unwanted = ReasonNoClaim
	}
	return a
}

// touch: something the attribution of s depends on changed at t; a new
// segment starts there if the attribution differs.
func (f *Fold) touch(s *slotState, t time.Time) {
	a := f.attribution(s)
	n := len(s.segs)
	if n == 0 {
		// Nothing accrues before the slot's first power fact: the machine
		// counts as off. The segment is kept for a boot before it.
		s.segs = append(s.segs, f.segmentOf(s, a, nanos(t)))
		if s.powerAt.IsZero() || t.Before(s.powerAt) {
			s.powerAt = t
		}
		return
	}
	last := &s.segs[n-1]
	if last.is(a) {
		return
	}
	// Events of one slot are written in order; a skewed time cannot go
	// back.
	at := max(nanos(t), last.from)
	if at == last.from {
		*last = f.segmentOf(s, a, at)
		return
	}
	s.segs = append(s.segs, f.segmentOf(s, a, at))
}

// accrue adds the slot's time [from, to) in power state on into rows,
// segment by segment, clipped to the fold's window.
func (f *Fold) accrue(s *slotState, on bool, from, to time.Time, rows map[rowKey]*acc) {
	for i := range s.segs {
		seg := &s.segs[i]
		a, b := fromNanos(seg.from), to
		if i+1 < len(s.segs) && s.segs[i+1].from < nanos(b) {
			b = fromNanos(s.segs[i+1].from)
		}
		if a.Before(from) {
			a = from
		}
		if !a.Before(b) {
			continue
		}
		if f.rec != nil {
			f.rec.span(seg.attribution(s.name), on, a, b)
			continue
		}
		f.add(seg.attribution(s.name), on, a, b, rows)
	}
}

// add accrues one attribution over [a, b).
func (f *Fold) add(at attribution, on bool, a, b time.Time, rows map[rowKey]*acc) {
	if !on && !at.booting {
		return
	}
	if a.Before(f.since) {
		a = f.since
	}
	if !f.until.IsZero() && b.After(f.until) {
		b = f.until
	}
	if !a.Before(b) {
		return
	}
	// An input-law pause that ends inside [a, b) splits it.
	if at.unwanted == ReasonInputLawPause && at.pausedUntil.Before(b) {
		if a.Before(at.pausedUntil) {
			f.add(at, on, a, at.pausedUntil, rows)
			a = at.pausedUntil
		}
		at.unwanted, at.pausedUntil = ReasonNoClaim, time.Time{}
	}
	d := b.Sub(a).Seconds()
	r := f.rowHint(at, rows)
	var joules float64
	if on {
		r.upSeconds += d
		joules = at.rates.upWatts * d
		if at.unwanted != "" {
			r.unwanted[reasonIndex(at.unwanted)] += d
		}
	} else {
		r.bootSeconds += d
		joules = at.rates.bootWatts * d
	}
	r.joules += joules
	r.cost += at.rates.perSecond*d + at.rates.energyPerJoule*joules
}

func reasonIndex(reason string) int {
	for i, r := range Reasons {
		if r == reason {
			return i
		}
	}
	return 0
}

// count counts a claim's boot (or failed boot) at t in its row, if t is
// in the window.
func (f *Fold) count(c *claimState, t time.Time, failed bool) {
	a := f.attribution(c.slot)
	a.claim, a.requester = c.name, c.requester
	if f.rec != nil {
		f.rec.mark(a, t, failed)
		return
	}
	f.countAt(a, t, failed, f.rows)
}

// countAt counts a boot (or failed boot) of attribution a at t into rows,
// if t is in the window.
func (f *Fold) countAt(a attribution, t time.Time, failed bool, rows map[rowKey]*acc) {
	if t.Before(f.since) || (!f.until.IsZero() && !t.Before(f.until)) {
		return
	}
	r := f.row(a, rows)
	if failed {
		r.failedBoots++
	} else {
		r.boots++
	}
}

// rowHint is f.row, or the row an Index's report already found for the
// span being added (Fold.hint): the same row, without hashing its key.
func (f *Fold) rowHint(a attribution, rows map[rowKey]*acc) *acc {
	if f.hint == nil {
		return f.row(a, rows)
	}
	if *f.hint == nil {
		*f.hint = f.row(a, rows)
	}
	return *f.hint
}
