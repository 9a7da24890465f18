package cost

import (
	"math"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events"
)

// Index is the cost accounting kept current in memory: fed the log's
// events in order (Apply), it keeps what a Fold of any window would
// accrue, as compact spans (a slot's machine up or booting under one
// attribution over [from, to)) and boot marks, so a report of any window
// and dimension is a walk over the spans that overlap it, not a read of
// the log. Report(dim, since, until) is exactly NewFold(dim, since, until)
// applied to the same events, then Report(until).
//
// Strings (slots, groups, claims, requesters) are interned; instants are
// Unix nanoseconds; a span is 32 bytes. An Index is safe for concurrent
// use: Apply takes the write lock, Report the read lock.
type Index struct {
	mu sync.RWMutex
	// fold is the window-less fold whose accruals land here (Fold.rec): its
	// slots' open intervals are what a report counts until its end.
	fold *Fold

	names   []string
	nameIDs map[string]uint32
	// claims are the (claim, requester) pairs spans name.
	claims   []claimNames
	claimIDs map[claimNames]uint32
	// prices are the (group, prices) pairs spans name.
	prices   []groupPrice
	priceIDs map[groupPrice]uint32
	// pauses are the instants input-law pauses end at, for spans whose
	// reason is ReasonInputLawPause (their claim is Unclaimed, so the
	// span's claim field names the pause instead).
	pauses []int64

	spans  []span // in the order the fold accrued them
	blocks []spanBlock
	marks  []bootMark
}

type claimNames struct{ claim, requester uint32 }

type groupPrice struct {
	group uint32
	rates rates
}

// span is one accrual: the slot's machine up (or booting) under one
// attribution over [from, to).
type span struct {
	from, to int64
	slot     uint32
	// claim indexes claims; pauses when unwanted is ReasonInputLawPause.
	claim uint32
	price uint32
	// flags: bit 0 up, bit 1 booting, bits 2-4 the unwanted reason
	// (0 none, else 1 + its index in Reasons).
	flags uint8
}

const (
	spanUp      = 1 << 0
	spanBooting = 1 << 1
	reasonShift = 2
)

// spanBlock bounds the instants of spansPerBlock consecutive spans, so a
// report skips the blocks that end before its window or start after it.
type spanBlock struct{ minFrom, maxTo int64 }

const spansPerBlock = 1024

// bootMark is a counted boot (or failed boot) at an instant.
type bootMark struct {
	at     int64
	slot   uint32
	claim  uint32
	price  uint32
	failed bool
}

// NewIndex is an empty index.
func NewIndex() *Index {
	x := &Index{
		fold:    NewFold(BySlot, time.Time{}, time.Time{}),
		nameIDs: map[string]uint32{}, claimIDs: map[claimNames]uint32{}, priceIDs: map[groupPrice]uint32{},
	}
	x.fold.rec = x
	return x
}

// Apply folds one event, as Fold.Apply does.
func (x *Index) Apply(e events.Event) {
	x.mu.Lock()
	x.fold.Apply(e)
	x.mu.Unlock()
}

// Spans is how many spans the index holds.
func (x *Index) Spans() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.spans)
}

func (x *Index) name(s string) uint32 {
	id, ok := x.nameIDs[s]
	if !ok {
		id = uint32(len(x.names))
		x.names = append(x.names, s)
		x.nameIDs[s] = id
	}
	return id
}

func (x *Index) claimOf(a attribution) uint32 {
	k := claimNames{x.name(a.claim), x.name(a.requester)}
	id, ok := x.claimIDs[k]
	if !ok {
		id = uint32(len(x.claims))
		x.claims = append(x.claims, k)
		x.claimIDs[k] = id
	}
	return id
}

func (x *Index) priceOf(a attribution) uint32 {
	k := groupPrice{x.name(a.group), a.rates}
	id, ok := x.priceIDs[k]
	if !ok {
		id = uint32(len(x.prices))
		x.prices = append(x.prices, k)
		x.priceIDs[k] = id
	}
	return id
}

// span records what the fold accrues of attribution a over [from, to):
// nothing when the machine is neither up nor booting (Fold.add counts
// nothing then).
func (x *Index) span(a attribution, on bool, from, to time.Time) {
	if !on && !a.booting {
		return
	}
	sp := span{from: nanos(from), to: nanos(to), slot: x.name(a.slot), price: x.priceOf(a)}
	if on {
		sp.flags |= spanUp
	}
	if a.booting {
		sp.flags |= spanBooting
	}
	if a.unwanted != "" {
		sp.flags |= uint8(1+reasonIndex(a.unwanted)) << reasonShift
	}
	if a.unwanted == ReasonInputLawPause {
		sp.claim = uint32(len(x.pauses))
		x.pauses = append(x.pauses, nanos(a.pausedUntil))
	} else {
		sp.claim = x.claimOf(a)
	}
	if len(x.spans)%spansPerBlock == 0 {
		x.blocks = append(x.blocks, spanBlock{minFrom: sp.from, maxTo: sp.to})
	}
	b := &x.blocks[len(x.blocks)-1]
	b.minFrom, b.maxTo = min(b.minFrom, sp.from), max(b.maxTo, sp.to)
	x.spans = append(x.spans, sp)
}

// mark records a claim's boot (or failed boot) at t.
func (x *Index) mark(a attribution, t time.Time, failed bool) {
	x.marks = append(x.marks, bootMark{at: nanos(t), slot: x.name(a.slot), claim: x.claimOf(a), price: x.priceOf(a), failed: failed})
}

// attribution is the span's attribution again, as the fold accrued it.
func (x *Index) attribution(sp span) attribution {
	p := x.prices[sp.price]
	a := attribution{group: x.names[p.group], slot: x.names[sp.slot], rates: p.rates, booting: sp.flags&spanBooting != 0}
	if r := sp.flags >> reasonShift; r != 0 {
		a.unwanted = Reasons[r-1]
	}
	if a.unwanted == ReasonInputLawPause {
		a.claim, a.requester, a.pausedUntil = Unclaimed, Unclaimed, fromNanos(x.pauses[sp.claim])
	} else {
		c := x.claims[sp.claim]
		a.claim, a.requester = x.names[c.claim], x.names[c.requester]
	}
	return a
}

// Report is the report of [since, until) by dim over the events applied:
// exactly what NewFold(dim, since, until), fed the same events, reports.
// A zero until is open: the report ends at end, as Fold.Report's does.
func (x *Index) Report(dim Dimension, since, until, end time.Time) Report {
	x.mu.RLock()
	defer x.mu.RUnlock()
	f := NewFold(dim, since, until)
	lo, hi := nanos(since), int64(math.MaxInt64)
	if !until.IsZero() {
		hi = nanos(until)
		end = until
	}
	// The spans in the order the fold accrued them: its sums are made in
	// the same order, so they are the same to the last bit.
	for b, blk := range x.blocks {
		if blk.maxTo <= lo || blk.minFrom >= hi {
			continue
		}
		for _, sp := range x.spans[b*spansPerBlock : min(len(x.spans), (b+1)*spansPerBlock)] {
			if sp.to <= lo || sp.from >= hi {
				continue
			}
			f.add(x.attribution(sp), sp.flags&spanUp != 0, fromNanos(sp.from), fromNanos(sp.to), f.rows)
		}
	}
	for _, m := range x.marks {
		p, c := x.prices[m.price], x.claims[m.claim]
		a := attribution{group: x.names[p.group], slot: x.names[m.slot], claim: x.names[c.claim], requester: x.names[c.requester], rates: p.rates}
		f.countAt(a, fromNanos(m.at), m.failed, f.rows)
	}
	// The open intervals: machines up (or booting) now, until the end.
	for _, s := range x.fold.order {
		if len(s.segs) > 0 && s.powerAt.Before(end) {
			f.accrue(s, s.on, s.powerAt, end, f.rows)
		}
	}
	return f.Report(end)
}

// nanos is t in Unix nanoseconds, saturated outside the years 1678 to
// 2262 (a window may reach past them; the log's instants do not).
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minInstant):
		return math.MinInt64
	case t.After(maxInstant):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var (
	minInstant = time.Unix(0, math.MinInt64)
	maxInstant = time.Unix(0, math.MaxInt64)
)

func fromNanos(ns int64) time.Time {
	if ns == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
