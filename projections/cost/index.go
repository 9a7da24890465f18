package cost

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/internal/claimname"
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
// Unix nanoseconds; a span is 10 to 18 bytes of varints (spanChunk), a
// boot mark 16. An Index is safe for concurrent use: Apply takes the
// write lock, Report the read lock.
type Index struct {
	mu sync.RWMutex
	// fold is the window-less fold whose accruals land here (Fold.rec): its
	// slots' open intervals are what a report counts until its end.
	fold *Fold
	// totals is a window-less fold by slot that is never fed events: its
	// rows are the running totals of every span as it is recorded, in the
	// order the fold accrues them, so SlotTotals is the totals of
	// NewFold(BySlot, ...) to the last bit, without a walk over the spans.
	totals *Fold

	// names are the slots, groups and requesters spans name.
	names   []string
	nameIDs map[string]uint32
	// owners are who spans and marks belong to: a slot and its claim,
	// as records in chunks of chunkSpans (index_owners.go).
	owners  []chunkfile.Chunk
	nowners int
	// pausedUntil is, by owner, the end of an input-law pause
	// (ReasonInputLawPause), in Unix nanoseconds: few owners have one, so
	// it is not a field of every owner.
	pausedUntil map[uint32]int64
	// lastOwner is, by slot name, the newest owner of a claim and the
	// newest unclaimed one: a slot's spans alternate between them, so a
	// claim is stored once, with no map of claims.
	lastOwner [][2]lastOwned
	// prices are the (group, prices) pairs spans name.
	prices   []groupPrice
	priceIDs map[groupPrice]uint32

	// spans in the order the fold accrued them, in chunks of chunkSpans
	// (index_spans.go; a full chunk keeps no spare room).
	spans      []spanChunk
	blocks     []spanBlock // one per chunk
	nspans     int
	chunkSpans int // spans, or marks, in a chunk
	// marks in the order the fold counted them, in chunks of chunkSpans
	// (index_spans.go).
	marks  []markChunk
	nmarks int

	// history, when set, takes every full chunk of spans (history.go):
	// the open chunk, and chunks it refused, stay in memory.
	history *chunkfile.File
	held    heldChunks
}

// owner is a slot and its claim (Unclaimed, with the end of an input-law
// pause in Index.pausedUntil when the reason is ReasonInputLawPause).
type owner struct {
	// claim is the claim's suffix with claimPacked when its name follows
	// the rule for the slot (claimname: a month at 10,000 slots is some
	// 150,000 claims, 4 bytes each instead of a string), else the index of
	// its name in names.
	claim     uint32
	slot      uint32
	requester uint32
}

const claimPacked = 1 << 31

// claimRef is owner.claim of claim, of slot.
func (x *Index) claimRef(slot, claim string) uint32 {
	if v, ok := claimname.Pack(slot, claim); ok {
		return claimPacked | v
	}
	return x.name(claim)
}

// claimOf is the name of owner ow's claim.
func (x *Index) claimOf(ow owner) string {
	if ow.claim&claimPacked != 0 {
		return claimname.Of(x.names[ow.slot], ow.claim&^claimPacked)
	}
	return x.names[ow.claim]
}

// appendClaimOf appends the name of owner ow's claim to dst.
func (x *Index) appendClaimOf(dst []byte, ow owner) []byte {
	if ow.claim&claimPacked != 0 {
		return claimname.AppendOf(dst, x.names[ow.slot], ow.claim&^claimPacked)
	}
	return append(dst, x.names[ow.claim]...)
}

// reportClaims are the owners' claims' names during one report by claim,
// each made once; nil in a report by another dimension, which needs none.
type reportClaims struct {
	x     *Index
	names []string
}

func (c *reportClaims) of(o uint32, ow owner) string {
	if c == nil {
		return ""
	}
	if c.names == nil {
		c.names = make([]string, c.x.nowners)
	}
	if c.names[o] == "" {
		c.names[o] = c.x.claimOf(ow)
	}
	return c.names[o]
}

type groupPrice struct {
	group uint32
	rates rates
}

// span is one accrual: the slot's machine up (or booting) under one
// attribution over [from, to).
type span struct {
	from, to int64
	owner    uint32
	// price indexes prices in its low priceBits; the high bits are flags:
	// up, booting, and the unwanted reason (0 none, else 1 + its index in
	// Reasons).
	price uint32
}

const (
	priceBits   = 27
	priceMask   = 1<<priceBits - 1
	spanUp      = 1 << 27
	spanBooting = 1 << 28
	reasonShift = 29
)

// spanBlock bounds the instants of a chunk of spans, so a report skips
// the chunks that end before its window or start after it.
type spanBlock struct{ minFrom, maxTo int64 }

const spansPerChunk = 4096

// ownerRow is the row of an owner's spans at one price (+1; 0: none yet)
// during a report.
type ownerRow struct {
	price uint32
	row   *acc
}

// bootMark is a counted boot (or failed boot) at an instant.
type bootMark struct {
	at    int64
	owner uint32
	// price as in span; spanUp set: a failed boot.
	price uint32
}

// NewIndex is an empty index that holds its history in memory.
func NewIndex() *Index { return newIndex(nil) }

// newIndex is an empty index whose full chunks of spans go to history
// (nil: they stay in memory).
func newIndex(history *chunkfile.File) *Index {
	x := &Index{
		fold:    NewFold(BySlot, time.Time{}, time.Time{}),
		nameIDs: map[string]uint32{}, priceIDs: map[groupPrice]uint32{}, pausedUntil: map[uint32]int64{},
		chunkSpans: spansPerChunk, history: history,
	}
	x.fold.rec = x
	x.totals = NewFold(BySlot, time.Time{}, time.Time{})
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
	return x.nspans
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

func (x *Index) ownerOf(a attribution) uint32 {
	o := owner{claim: x.claimRef(a.slot, a.claim), slot: x.name(a.slot), requester: x.name(a.requester)}
	var paused int64
	if a.unwanted == ReasonInputLawPause {
		paused = nanos(a.pausedUntil)
	}
	for int(o.slot) >= len(x.lastOwner) {
		x.lastOwner = append(x.lastOwner, [2]lastOwned{})
	}
	k := 0
	if a.claim == Unclaimed {
		k = 1
	}
	last := &x.lastOwner[o.slot][k]
	if last.id != 0 && last.claim == o.claim && last.requester == o.requester && x.pausedUntil[last.id-1] == paused {
		return last.id - 1
	}
	id := x.addOwner(o)
	*last = lastOwned{id: id + 1, claim: o.claim, requester: o.requester}
	if paused != 0 {
		x.pausedUntil[id] = paused
	}
	return id
}

func (x *Index) priceOf(a attribution) uint32 {
	k := groupPrice{x.name(a.group), a.rates}
	id, ok := x.priceIDs[k]
	if !ok {
		id = uint32(len(x.prices))
		if id > priceMask {
			// 134 million price changes: not a log this index serves.
			panic("cost index: more than 2^27 distinct prices")
		}
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
	x.totals.add(a, on, from, to, x.totals.rows)
	sp := span{from: nanos(from), to: nanos(to), owner: x.ownerOf(a), price: x.priceOf(a)}
	if on {
		sp.price |= spanUp
	}
	if a.booting {
		sp.price |= spanBooting
	}
	if a.unwanted != "" {
		sp.price |= uint32(1+reasonIndex(a.unwanted)) << reasonShift
	}
	x.addSpan(sp)
}

// addSpan appends sp to the spans, in a new chunk when the last is full.
func (x *Index) addSpan(sp span) {
	if x.nspans%x.chunkSpans == 0 {
		if len(x.spans) > 0 {
			x.store(&x.spans[len(x.spans)-1].Chunk)
		}
		x.spans = append(x.spans, spanChunk{})
		x.blocks = append(x.blocks, spanBlock{minFrom: sp.from, maxTo: sp.to})
	}
	c := len(x.spans) - 1
	x.spans[c].add(sp)
	b := &x.blocks[c]
	b.minFrom, b.maxTo = min(b.minFrom, sp.from), max(b.maxTo, sp.to)
	x.nspans++
}

// mark records a claim's boot (or failed boot) at t.
func (x *Index) mark(a attribution, t time.Time, failed bool) {
	x.totals.countAt(a, t, failed, x.totals.rows) // a boot makes a row, as in the fold
	m := bootMark{at: nanos(t), owner: x.ownerOf(a), price: x.priceOf(a)}
	if failed {
		m.price |= spanUp
	}
	x.addMark(m)
}

// addMark appends m to the marks, in a new chunk when the last is full.
func (x *Index) addMark(m bootMark) {
	if x.nmarks%x.chunkSpans == 0 {
		if len(x.marks) > 0 {
			x.store(&x.marks[len(x.marks)-1].Chunk)
		}
		x.marks = append(x.marks, markChunk{})
	}
	x.marks[len(x.marks)-1].add(m)
	x.nmarks++
}

// attribution is the attribution of owner o and price p (flags
// included) again, as the fold accrued it, its owner read by owners; its
// claim is claims' (none when nil).
func (x *Index) attribution(o, p uint32, owners *ownerReader, claims *reportClaims) (attribution, error) {
	ow, err := owners.owner(o)
	if err != nil {
		return attribution{}, err
	}
	a := x.priced(o, p)
	a.slot, a.claim, a.requester = x.names[ow.slot], claims.of(o, ow), x.names[ow.requester]
	return a, nil
}

// priced is the attribution of owner o and price p without the owner's
// names: all a span adds to the row its owner already has in a report.
func (x *Index) priced(o, p uint32) attribution {
	gp := x.prices[p&priceMask]
	a := attribution{group: x.names[gp.group], rates: gp.rates, booting: p&spanBooting != 0}
	if r := p >> reasonShift; r != 0 {
		a.unwanted = Reasons[r-1]
	}
	if a.unwanted == ReasonInputLawPause {
		a.pausedUntil = fromNanos(x.pausedUntil[o])
	}
	return a
}

// Report is the report of [since, until) by dim over the events applied:
// exactly what NewFold(dim, since, until), fed the same events, reports.
// A zero until is open: the report ends at end, as Fold.Report's does.
// Its error is the history file's, when it cannot read a chunk back.
func (x *Index) Report(dim Dimension, since, until, end time.Time) (Report, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	f := NewFold(dim, since, until)
	lo, hi := nanos(since), int64(math.MaxInt64)
	if !until.IsZero() {
		hi = nanos(until)
		end = until
	}
	// The spans in the order the fold accrued them: its sums are made in
	// the same order, so they are the same to the last bit. A row is one
	// key and currency, both of the span's owner and price: each owner's
	// row is looked up once (for its newest price).
	rowOf := make([]ownerRow, x.nowners)
	owners := &ownerReader{x: x}
	var claims *reportClaims
	if dim == ByClaim {
		claims = &reportClaims{x: x}
	}
	var scratch []byte
	for c, blk := range x.blocks {
		if blk.maxTo <= lo || blk.minFrom >= hi {
			continue
		}
		b, err := x.chunkBytes(&x.spans[c].Chunk, "spans", c, &scratch)
		if err != nil {
			return Report{}, fmt.Errorf("cost index: %w", err)
		}
		for sp := range spansOf(b) {
			if sp.to <= lo || sp.from >= hi {
				continue
			}
			o := &rowOf[sp.owner]
			if p := sp.price&priceMask + 1; o.price != p {
				o.price, o.row = p, nil
			}
			var a attribution
			if o.row != nil {
				a = x.priced(sp.owner, sp.price) // its row is found: no names needed
			} else if a, err = x.attribution(sp.owner, sp.price, owners, claims); err != nil {
				return Report{}, fmt.Errorf("cost index: %w", err)
			}
			f.hint = &o.row
			f.add(a, sp.price&spanUp != 0, fromNanos(sp.from), fromNanos(sp.to), f.rows)
		}
	}
	f.hint = nil
	for c := range x.marks {
		b, err := x.chunkBytes(&x.marks[c].Chunk, "boot marks", c, &scratch)
		if err != nil {
			return Report{}, fmt.Errorf("cost index: %w", err)
		}
		for m := range marksOf(b) {
			a, err := x.attribution(m.owner, m.price&priceMask, owners, claims)
			if err != nil {
				return Report{}, fmt.Errorf("cost index: %w", err)
			}
			f.countAt(a, fromNanos(m.at), m.price&spanUp != 0, f.rows)
		}
	}
	// The open intervals: machines up (or booting) now, until the end.
	for _, s := range x.fold.order {
		if len(s.segs) > 0 && s.powerAt.Before(end) {
			f.accrue(s, s.on, s.powerAt, end, f.rows)
		}
	}
	return f.Report(end), nil
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
