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
// segment's.
type segment struct {
	from time.Time
	attr attribution
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
		s.segs = append(s.segs, segment{from: t, attr: a})
		if s.powerAt.IsZero() || t.Before(s.powerAt) {
			s.powerAt = t
		}
		return
	}
	last := &s.segs[n-1]
	if last.attr == a {
		return
	}
	if t.Before(last.from) {
		t = last.from // events of one slot are written in order; a skewed time cannot go back
	}
	if t.Equal(last.from) {
		last.attr = a
		return
	}
	s.segs = append(s.segs, segment{from: t, attr: a})
}

// accrue adds the slot's time [from, to) in power state on into rows,
// segment by segment, clipped to the fold's window.
func (f *Fold) accrue(s *slotState, on bool, from, to time.Time, rows map[rowKey]*acc) {
	for i, seg := range s.segs {
		a, b := seg.from, to
		if i+1 < len(s.segs) && s.segs[i+1].from.Before(b) {
			b = s.segs[i+1].from
		}
		if a.Before(from) {
			a = from
		}
		if !a.Before(b) {
			continue
		}
		if f.rec != nil {
			f.rec.span(seg.attr, on, a, b)
			continue
		}
		f.add(seg.attr, on, a, b, rows)
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
