package cost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"time"

	"github.com/claimstream/claimstream/events"
)

// A saved copy of an Index: everything it needs to continue exactly where
// it stopped (its spans, marks and interned tables, the fold's groups,
// slots and live claims, the running totals) and the sequence of the last
// event it folded. Layout: indexMagic, a version byte, the payload (varints,
// instants as deltas where they run in order, floats as their 8 bits), then
// a CRC-32C of everything before it.
const (
	indexMagic        = "CSIX"
	indexCodecVersion = 1
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrIndexDamaged is wrapped by UnmarshalIndex's errors: the bytes are not a
// copy this version wrote, or not the whole of one.
var ErrIndexDamaged = errors.New("damaged cost index copy")

// MarshalIndex encodes x, which has folded the log up to seq, for
// UnmarshalIndex.
func (x *Index) MarshalIndex(seq uint64) []byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := &encoder{b: make([]byte, 0, 64+x.nspans*10+len(x.marks)*8)}
	e.b = append(e.b, indexMagic...)
	e.b = append(e.b, indexCodecVersion)
	e.u(seq)

	// Interned tables.
	e.u(uint64(len(x.names)))
	for _, n := range x.names {
		e.s(n)
	}
	e.u(uint64(len(x.owners)))
	for _, o := range x.owners {
		e.s(o.claim)
		e.i(o.pausedUntil)
		e.u(uint64(o.slot))
		e.u(uint64(o.requester))
	}
	e.u(uint64(len(x.lastOwner)))
	for _, l := range x.lastOwner {
		e.u(uint64(l[0]))
		e.u(uint64(l[1]))
	}
	e.u(uint64(len(x.prices)))
	for _, p := range x.prices {
		e.u(uint64(p.group))
		e.rates(p.rates)
	}

	// Spans and marks, instants as deltas.
	e.u(uint64(x.nspans))
	var prev int64
	for _, chunk := range x.spans {
		for _, sp := range chunk {
			e.i(sp.from - prev)
			e.i(sp.to - sp.from)
			e.u(uint64(sp.owner))
			e.u(uint64(sp.price))
			prev = sp.from
		}
	}
	e.u(uint64(len(x.marks)))
	prev = 0
	for _, m := range x.marks {
		e.i(m.at - prev)
		e.u(uint64(m.owner))
		e.u(uint64(m.price))
		prev = m.at
	}

	// The running totals.
	e.u(uint64(len(x.totals.rows)))
	for _, k := range sortedRowKeys(x.totals.rows) {
		a := x.totals.rows[k]
		e.s(k.key)
		e.s(k.currency)
		e.f(a.upSeconds)
		e.f(a.bootSeconds)
		e.f(a.joules)
		e.f(a.cost)
		e.i(int64(a.boots))
		e.i(int64(a.failedBoots))
		for _, v := range a.unwanted {
			e.f(v)
		}
	}

	// The fold: groups (their prices), slots in the order met, claims.
	f := x.fold
	slotIdx := make(map[*slotState]uint64, len(f.order))
	for i, s := range f.order {
		slotIdx[s] = uint64(i)
	}
	var claims []*claimState
	claimIdx := map[*claimState]uint64{}
	addClaim := func(c *claimState) {
		if _, ok := claimIdx[c]; !ok {
			claimIdx[c] = uint64(len(claims))
			claims = append(claims, c)
		}
	}
	for _, s := range f.order {
		if s.live != nil {
			addClaim(s.live)
		}
	}
	claimNames := slices.Sorted(func(yield func(string) bool) {
		for n := range f.claims {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range claimNames {
		addClaim(f.claims[n])
	}

	groupNames := slices.Sorted(func(yield func(string) bool) {
		for n := range f.groups {
			if !yield(n) {
				return
			}
		}
	})
	e.u(uint64(len(groupNames)))
	for _, n := range groupNames {
		g := f.groups[n]
		e.s(n)
		c := events.EffectiveCost(g.spec, nil)
		e.cost(&c)
		members := make([]uint64, 0, len(g.slots))
		for _, s := range g.slots {
			members = append(members, slotIdx[s])
		}
		slices.Sort(members)
		e.u(uint64(len(members)))
		for _, m := range members {
			e.u(m)
		}
	}
	e.u(uint64(len(f.order)))
	for _, s := range f.order {
		e.s(s.name)
		e.s(s.group)
		e.cost(s.cost)
		e.rates(s.rates)
		e.bool(s.gone)
		if s.live != nil {
			e.u(claimIdx[s.live] + 1)
		} else {
			e.u(0)
		}
		e.t(s.pausedUntil)
		e.bool(s.on)
		e.t(s.powerAt)
		e.u(uint64(len(s.segs)))
		for _, seg := range s.segs {
			e.t(seg.from)
			e.attribution(seg.attr)
		}
	}
	e.u(uint64(len(claims)))
	for _, c := range claims {
		e.s(c.name)
		e.s(c.requester)
		e.u(slotIdx[c.slot])
		e.bool(c.booting)
		e.bool(c.scaleDown)
		e.bool(c.refused)
	}
	e.u(uint64(len(claimNames)))
	for _, n := range claimNames {
		e.s(n)
		e.u(claimIdx[f.claims[n]])
	}

	return binary.LittleEndian.AppendUint32(e.b, crc32.Checksum(e.b, crcTable))
}

// UnmarshalIndex decodes a copy MarshalIndex wrote: the index and the
// sequence of the last event it folded. A copy that is cut short, altered
// (its checksum), of another version, or not self-consistent is refused
// with an error wrapping ErrIndexDamaged.
func UnmarshalIndex(b []byte) (*Index, uint64, error) {
	if len(b) < len(indexMagic)+1+4 || string(b[:len(indexMagic)]) != indexMagic {
		return nil, 0, fmt.Errorf("%w: not a cost index copy", ErrIndexDamaged)
	}
	if v := b[len(indexMagic)]; v != indexCodecVersion {
		return nil, 0, fmt.Errorf("%w: format version %d, this build reads %d", ErrIndexDamaged, v, indexCodecVersion)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", ErrIndexDamaged)
	}
	d := &decoder{b: body[len(indexMagic)+1:]}
	x, seq := decodeIndex(d)
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes past the end", len(d.b))
	}
	if d.err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrIndexDamaged, d.err)
	}
	return x, seq, nil
}

func decodeIndex(d *decoder) (*Index, uint64) {
	x := NewIndex()
	seq := d.u()

	x.names = make([]string, d.count())
	for i := range x.names {
		x.names[i] = d.s()
		if _, dup := x.nameIDs[x.names[i]]; dup {
			d.fail("name %q twice", x.names[i])
		}
		x.nameIDs[x.names[i]] = uint32(i)
	}
	nameRef := func() uint32 { return uint32(d.ref(uint64(len(x.names)), "name")) }
	x.owners = make([]owner, d.count())
	for i := range x.owners {
		x.owners[i] = owner{claim: d.s(), pausedUntil: d.i(), slot: nameRef(), requester: nameRef()}
	}
	x.lastOwner = make([][2]uint32, d.count())
	for i := range x.lastOwner {
		for k := range 2 {
			x.lastOwner[i][k] = uint32(d.ref(uint64(len(x.owners))+1, "owner"))
		}
	}
	x.prices = make([]groupPrice, d.count())
	for i := range x.prices {
		x.prices[i] = groupPrice{group: nameRef(), rates: d.rates()}
		x.priceIDs[x.prices[i]] = uint32(i)
	}
	if len(x.prices) > priceMask+1 {
		d.fail("%d prices", len(x.prices))
	}

	nspans := d.count()
	var prev int64
	for range nspans {
		if d.err != nil {
			break
		}
		from := prev + d.i()
		sp := span{from: from, to: from + d.i(), owner: uint32(d.ref(uint64(len(x.owners)), "owner")), price: uint32(d.u())}
		if sp.price&priceMask >= uint32(len(x.prices)) || sp.price>>reasonShift > uint32(len(Reasons)) {
			d.fail("span price %#x", sp.price)
		}
		prev = from
		if x.nspans%spansPerChunk == 0 {
			x.spans = append(x.spans, make([]span, 0, min(spansPerChunk, nspans-x.nspans)))
			x.blocks = append(x.blocks, spanBlock{minFrom: sp.from, maxTo: sp.to})
		}
		c := len(x.spans) - 1
		x.spans[c] = append(x.spans[c], sp)
		bl := &x.blocks[c]
		bl.minFrom, bl.maxTo = min(bl.minFrom, sp.from), max(bl.maxTo, sp.to)
		x.nspans++
	}
	x.marks = make([]bootMark, d.count())
	prev = 0
	for i := range x.marks {
		at := prev + d.i()
		m := bootMark{at: at, owner: uint32(d.ref(uint64(len(x.owners)), "owner")), price: uint32(d.u())}
		if m.price&^uint32(spanUp) >= uint32(len(x.prices)) {
			d.fail("mark price %#x", m.price)
		}
		x.marks[i] = m
		prev = at
	}

	for range d.count() {
		k := rowKey{key: d.s(), currency: d.s()}
		a := &acc{upSeconds: d.f(), bootSeconds: d.f(), joules: d.f(), cost: d.f(), boots: int(d.i()), failedBoots: int(d.i())}
		for j := range a.unwanted {
			a.unwanted[j] = d.f()
		}
		x.totals.rows[k] = a
	}

	f := x.fold
	type groupMembers struct {
		g       *groupState
		members []uint64
	}
	groups := make([]groupMembers, d.count())
	for i := range groups {
		name := d.s()
		g := f.group(name)
		if c := d.cost(); c != nil {
			g.spec.Cost = c
		}
		groups[i].g = g
		groups[i].members = make([]uint64, d.count())
		for j := range groups[i].members {
			groups[i].members[j] = d.u()
		}
	}
	slots := make([]*slotState, d.count())
	liveRefs := make([]uint64, len(slots))
	for i := range slots {
		if d.err != nil {
			break
		}
		s := &slotState{name: d.s(), group: d.s(), cost: d.cost(), rates: d.rates(), gone: d.bool()}
		liveRefs[i] = d.u()
		s.pausedUntil = d.t()
		s.on = d.bool()
		s.powerAt = d.t()
		s.segs = make([]segment, d.count())
		for j := range s.segs {
			s.segs[j] = segment{from: d.t(), attr: d.attribution()}
		}
		if _, dup := f.slots[s.name]; dup {
			d.fail("slot %q twice", s.name)
		}
		slots[i] = s
		f.slots[s.name] = s
		f.order = append(f.order, s)
	}
	for _, gm := range groups {
		for _, m := range gm.members {
			if m >= uint64(len(slots)) || slots[m] == nil {
				d.fail("group member %d of %d slots", m, len(slots))
				break
			}
			gm.g.slots[slots[m].name] = slots[m]
		}
	}
	claims := make([]*claimState, d.count())
	for i := range claims {
		c := &claimState{name: d.s(), requester: d.s()}
		if si := d.ref(uint64(len(slots)), "slot"); d.err == nil {
			c.slot = slots[si]
		}
		c.booting, c.scaleDown, c.refused = d.bool(), d.bool(), d.bool()
		claims[i] = c
	}
	for i, r := range liveRefs {
		if r == 0 || slots[i] == nil {
			continue
		}
		if r > uint64(len(claims)) {
			d.fail("live claim %d of %d", r, len(claims))
			continue
		}
		slots[i].live = claims[r-1]
	}
	for range d.count() {
		name := d.s()
		if ci := d.ref(uint64(len(claims)), "claim"); d.err == nil {
			f.claims[name] = claims[ci]
		}
	}
	return x, seq
}

func sortedRowKeys(rows map[rowKey]*acc) []rowKey {
	keys := make([]rowKey, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b rowKey) int {
		if a.key != b.key {
			return compareStrings(a.key, b.key)
		}
		return compareStrings(a.currency, b.currency)
	})
	return keys
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type encoder struct{ b []byte }

func (e *encoder) u(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) i(v int64)  { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) f(v float64) {
	e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v))
}
func (e *encoder) s(v string) { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *encoder) t(v time.Time) { e.i(nanos(v)) }

func (e *encoder) optional(v *float64) {
	e.bool(v != nil)
	if v != nil {
		e.f(*v)
	}
}

func (e *encoder) cost(c *events.Cost) {
	e.bool(c != nil)
	if c == nil {
		return
	}
	e.optional(c.PricePerHour)
	e.optional(c.PowerWatts)
	e.optional(c.BootWatts)
	e.optional(c.EnergyPricePerKWh)
	e.s(c.Currency)
}

func (e *encoder) rates(r rates) {
	e.s(r.currency)
	e.f(r.perSecond)
	e.f(r.upWatts)
	e.f(r.bootWatts)
	e.f(r.energyPerJoule)
}

func (e *encoder) attribution(a attribution) {
	e.s(a.group)
	e.s(a.slot)
	e.s(a.claim)
	e.s(a.requester)
	e.bool(a.booting)
	e.s(a.unwanted)
	e.t(a.pausedUntil)
	e.rates(a.rates)
}

// decoder reads what encoder wrote; the first fault sticks (err) and every
// later read returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
	d.b = nil
}

func (d *decoder) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("cut short")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) i() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("cut short")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) f() float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("cut short")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

// count is a number of elements to come; each takes at least a byte, so
// a count past the bytes left is damage, not a huge allocation.
func (d *decoder) count() int {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.fail("a count of %d with %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

// ref is a reference into a table of n.
func (d *decoder) ref(n uint64, what string) uint64 {
	v := d.u()
	if v >= n {
		d.fail("%s %d of %d", what, v, n)
		return 0
	}
	return v
}

func (d *decoder) s() string {
	n := d.count()
	if d.err != nil {
		return ""
	}
	v := string(d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *decoder) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail("bad flag")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

func (d *decoder) t() time.Time { return fromNanos(d.i()) }

func (d *decoder) optional() *float64 {
	if !d.bool() {
		return nil
	}
	v := d.f()
	return &v
}

func (d *decoder) cost() *events.Cost {
	if !d.bool() {
		return nil
	}
	return &events.Cost{PricePerHour: d.optional(), PowerWatts: d.optional(), BootWatts: d.optional(), EnergyPricePerKWh: d.optional(), Currency: d.s()}
}

func (d *decoder) rates() rates {
	return rates{currency: d.s(), perSecond: d.f(), upWatts: d.f(), bootWatts: d.f(), energyPerJoule: d.f()}
}

func (d *decoder) attribution() attribution {
	a := attribution{group: d.s(), slot: d.s(), claim: d.s(), requester: d.s(), booting: d.bool(), unwanted: d.s(), pausedUntil: d.t(), rates: d.rates()}
	if a.unwanted != "" && !slices.Contains(Reasons, a.unwanted) {
		d.fail("unknown reason %q", a.unwanted)
	}
	return a
}
