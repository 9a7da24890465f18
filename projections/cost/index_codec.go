package cost

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/internal/copycodec"
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

// ErrIndexDamaged is wrapped by UnmarshalIndex's errors: the bytes are not a
// copy this version wrote, or not the whole of one.
var ErrIndexDamaged = errors.New("damaged cost index copy")

// MarshalIndex encodes x, which has folded the log up to seq, for
// UnmarshalIndex. Its error is the history file's, when it cannot read a
// chunk back.
func (x *Index) MarshalIndex(seq uint64) ([]byte, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := &encoder{copycodec.NewEncoder(indexMagic, indexCodecVersion, 64+x.nspans*10+x.nmarks*8)}
	if err := x.encode(e, seq); err != nil {
		return nil, err
	}
	return e.Seal(), nil
}

// WriteIndex writes what MarshalIndex returns to w as it is encoded.
func (x *Index) WriteIndex(w io.Writer, seq uint64) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := &encoder{copycodec.NewWriterEncoder(w, indexMagic, indexCodecVersion)}
	if err := x.encode(e, seq); err != nil {
		return err
	}
	return e.End()
}

// encode is the one writer of a copy's payload; the caller holds mu.
func (x *Index) encode(e *encoder, seq uint64) error {
	e.Uint(seq)

	// Interned tables.
	e.Uint(uint64(len(x.names)))
	for _, n := range x.names {
		e.Str(n)
	}
	e.Uint(uint64(x.nowners))
	var claim, scratch []byte
	for c := range x.owners {
		b, err := x.chunkBytes(&x.owners[c], "owners", c, &scratch)
		if err != nil {
			return fmt.Errorf("cost index: %w", err)
		}
		for i := range len(b) / ownerSize {
			o := ownerAt(b, i)
			claim = x.appendClaimOf(claim[:0], o)
			e.StrBytes(claim)
			e.Int(x.pausedUntil[uint32(c*x.chunkSpans+i)])
			e.Uint(uint64(o.slot))
			e.Uint(uint64(o.requester))
		}
	}
	e.Uint(uint64(len(x.lastOwner)))
	for _, l := range x.lastOwner {
		e.Uint(uint64(l[0].id))
		e.Uint(uint64(l[1].id))
	}
	e.Uint(uint64(len(x.prices)))
	for _, p := range x.prices {
		e.Uint(uint64(p.group))
		e.rates(p.rates)
	}

	// Spans and marks, instants as deltas.
	e.Uint(uint64(x.nspans))
	var prev int64
	for c := range x.spans {
		b, err := x.chunkBytes(&x.spans[c].Chunk, "spans", c, &scratch)
		if err != nil {
			return fmt.Errorf("cost index: %w", err)
		}
		for sp := range spansOf(b) {
			e.Int(sp.from - prev)
			e.Int(sp.to - sp.from)
			e.Uint(uint64(sp.owner))
			e.Uint(uint64(sp.price))
			prev = sp.from
		}
	}
	e.Uint(uint64(x.nmarks))
	prev = 0
	for c := range x.marks {
		b, err := x.chunkBytes(&x.marks[c].Chunk, "boot marks", c, &scratch)
		if err != nil {
			return fmt.Errorf("cost index: %w", err)
		}
		for m := range marksOf(b) {
			e.Int(m.at - prev)
			e.Uint(uint64(m.owner))
			e.Uint(uint64(m.price))
			prev = m.at
		}
	}

	// The running totals.
	e.Uint(uint64(len(x.totals.rows)))
	for _, k := range sortedRowKeys(x.totals.rows) {
		a := x.totals.rows[k]
		e.Str(k.key)
		e.Str(k.currency)
		e.Float(a.upSeconds)
		e.Float(a.bootSeconds)
		e.Float(a.joules)
		e.Float(a.cost)
		e.Int(int64(a.boots))
		e.Int(int64(a.failedBoots))
		for _, v := range a.unwanted {
			e.Float(v)
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
	e.Uint(uint64(len(groupNames)))
	for _, n := range groupNames {
		g := f.groups[n]
		e.Str(n)
		c := events.EffectiveCost(g.spec, nil)
		e.cost(&c)
		members := make([]uint64, 0, len(g.slots))
		for _, s := range g.slots {
			members = append(members, slotIdx[s])
		}
		slices.Sort(members)
		e.Uint(uint64(len(members)))
		for _, m := range members {
			e.Uint(m)
		}
	}
	e.Uint(uint64(len(f.order)))
	for _, s := range f.order {
		e.Str(s.name)
		e.Str(s.group)
		e.cost(s.cost)
		e.rates(s.rates)
		e.Bool(s.gone)
		if s.live != nil {
			e.Uint(claimIdx[s.live] + 1)
		} else {
			e.Uint(0)
		}
		e.t(s.pausedUntil)
		e.Bool(s.on)
		e.t(s.powerAt)
		e.Uint(uint64(len(s.segs)))
		for i := range s.segs {
			e.Int(s.segs[i].from)
			e.attribution(s.segs[i].attribution(s.name))
		}
	}
	e.Uint(uint64(len(claims)))
	for _, c := range claims {
		e.Str(c.name)
		e.Str(c.requester)
		e.Uint(slotIdx[c.slot])
		e.Bool(c.booting)
		e.Bool(c.scaleDown)
		e.Bool(c.refused)
	}
	e.Uint(uint64(len(claimNames)))
	for _, n := range claimNames {
		e.Str(n)
		e.Uint(claimIdx[f.claims[n]])
	}
	return nil
}

// UnmarshalIndex decodes a copy MarshalIndex wrote: the index and the
// sequence of the last event it folded. A copy that is cut short, altered
// (its checksum), of another version, or not self-consistent is refused
// with an error wrapping ErrIndexDamaged.
func UnmarshalIndex(b []byte) (*Index, uint64, error) {
	cd, err := copycodec.Open(b, indexMagic, indexCodecVersion, "a cost index copy")
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrIndexDamaged, err)
	}
	return unmarshalIndex(cd, nil)
}

// UnmarshalIndexFrom decodes a copy of size bytes as UnmarshalIndex does,
// as it is read from r: the copy is never held whole.
func UnmarshalIndexFrom(r io.Reader, size int) (*Index, uint64, error) {
	return unmarshalIndexFrom(r, size, nil)
}

// unmarshalIndexFrom is UnmarshalIndexFrom of an index whose full chunks
// of spans go to history (nil: memory).
func unmarshalIndexFrom(r io.Reader, size int, history *chunkfile.File) (*Index, uint64, error) {
	cd, err := copycodec.OpenReader(r, size, indexMagic, indexCodecVersion, "a cost index copy")
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrIndexDamaged, err)
	}
	return unmarshalIndex(cd, history)
}

func unmarshalIndex(cd *copycodec.Decoder, history *chunkfile.File) (*Index, uint64, error) {
	d := &decoder{Decoder: cd}
	x, seq := decodeIndex(d, history)
	if err := d.End(); err != nil {
		x.release() // the chunks it wrote before the damage
		return nil, 0, fmt.Errorf("%w: %w", ErrIndexDamaged, err)
	}
	return x, seq, nil
}

func decodeIndex(d *decoder, history *chunkfile.File) (*Index, uint64) {
	x := newIndex(history)
	seq := d.Uint()

	x.names = make([]string, d.Count())
	for i := range x.names {
		x.names[i] = d.Str()
		if _, dup := x.nameIDs[x.names[i]]; dup {
			d.Fail("name %q twice", x.names[i])
		}
		x.nameIDs[x.names[i]] = uint32(i)
	}
	d.x = x
	nameRef := func() uint32 { return uint32(d.Ref(uint64(len(x.names)), "name")) }
	// The owners as decoded, for lastOwner's: the index holds them in
	// chunks (addOwner).
	owners := make([]owner, d.Count())
	for i := range owners {
		claim, pausedUntil, slot := d.Str(), d.Int(), nameRef()
		owners[i] = owner{slot: slot, requester: nameRef()}
		if pausedUntil != 0 {
			x.pausedUntil[uint32(i)] = pausedUntil
		}
		if d.Err == nil {
			owners[i].claim = x.claimRef(x.names[slot], claim)
		}
		x.addOwner(owners[i])
	}
	x.lastOwner = make([][2]lastOwned, d.Count())
	for i := range x.lastOwner {
		for k := range 2 {
			if ref := uint32(d.Ref(uint64(len(owners))+1, "owner")); ref != 0 && d.Err == nil {
				o := owners[ref-1]
				x.lastOwner[i][k] = lastOwned{id: ref, claim: o.claim, requester: o.requester}
			}
		}
	}
	x.prices = make([]groupPrice, d.Count())
	for i := range x.prices {
		x.prices[i] = groupPrice{group: nameRef(), rates: d.rates()}
		x.priceIDs[x.prices[i]] = uint32(i)
	}
	if len(x.prices) > priceMask+1 {
		d.Fail("%d prices", len(x.prices))
	}

	nspans := d.Count()
	var prev int64
	for range nspans {
		if d.Err != nil {
			break
		}
		from := prev + d.Int()
		sp := span{from: from, to: from + d.Int(), owner: uint32(d.Ref(uint64(x.nowners), "owner")), price: uint32(d.Uint())}
		if sp.price&priceMask >= uint32(len(x.prices)) || sp.price>>reasonShift > uint32(len(Reasons)) {
			d.Fail("span price %#x", sp.price)
		}
		prev = from
		x.addSpan(sp)
	}
	if len(x.spans) > 0 {
		x.spans[len(x.spans)-1].Seal() // the last chunk, full or not: the live path may add to it
	}
	nmarks := d.Count()
	prev = 0
	for range nmarks {
		if d.Err != nil {
			break
		}
		at := prev + d.Int()
		m := bootMark{at: at, owner: uint32(d.Ref(uint64(x.nowners), "owner")), price: uint32(d.Uint())}
		if m.price&^uint32(spanUp) >= uint32(len(x.prices)) {
			d.Fail("mark price %#x", m.price)
		}
		x.addMark(m)
		prev = at
	}
	if len(x.marks) > 0 {
		x.marks[len(x.marks)-1].Seal() // as the spans' last chunk
	}

	for range d.Count() {
		k := rowKey{key: d.held(), currency: d.held()}
		a := &acc{upSeconds: d.Float(), bootSeconds: d.Float(), joules: d.Float(), cost: d.Float(), boots: int(d.Int()), failedBoots: int(d.Int())}
		for j := range a.unwanted {
			a.unwanted[j] = d.Float()
		}
		x.totals.rows[k] = a
	}

	f := x.fold
	type groupMembers struct {
		g       *groupState
		members []uint64
	}
	groups := make([]groupMembers, d.Count())
	for i := range groups {
		name := d.held()
		g := f.group(name)
		if c := d.cost(); c != nil {
			g.spec.Cost = c
		}
		groups[i].g = g
		groups[i].members = make([]uint64, d.Count())
		for j := range groups[i].members {
			groups[i].members[j] = d.Uint()
		}
	}
	slots := make([]*slotState, d.Count())
	liveRefs := make([]uint64, len(slots))
	for i := range slots {
		if d.Err != nil {
			break
		}
		s := &slotState{name: d.held(), group: d.held(), cost: d.cost(), rates: d.rates(), gone: d.Bool()}
		liveRefs[i] = d.Uint()
		s.pausedUntil = d.t()
		s.on = d.Bool()
		s.powerAt = d.t()
		nsegs := d.Count()
		s.segs = make([]segment, 0, nsegs)
		for range nsegs {
			from := d.Int()
			a := d.attribution()
			if a.slot != s.name && d.Err == nil {
				d.Fail("slot %q holds a segment of %q", s.name, a.slot)
			}
			s.segs = append(s.segs, f.segmentOf(s, a, from))
		}
		if _, dup := f.slots[s.name]; dup {
			d.Fail("slot %q twice", s.name)
		}
		slots[i] = s
		f.slots[s.name] = s
		f.order = append(f.order, s)
	}
	for _, gm := range groups {
		for _, m := range gm.members {
			if m >= uint64(len(slots)) || slots[m] == nil {
				d.Fail("group member %d of %d slots", m, len(slots))
				break
			}
			gm.g.slots[slots[m].name] = slots[m]
		}
	}
	claims := make([]*claimState, d.Count())
	for i := range claims {
		c := &claimState{name: d.held(), requester: d.held()}
		if si := d.Ref(uint64(len(slots)), "slot"); d.Err == nil {
			c.slot = slots[si]
			// The slot's segments name the claim: they share its name.
			for j := range c.slot.segs {
				if g := &c.slot.segs[j]; g.claim == c.name {
					g.claim = c.name
				}
			}
		}
		c.booting, c.scaleDown, c.refused = d.Bool(), d.Bool(), d.Bool()
		claims[i] = c
	}
	for i, r := range liveRefs {
		if r == 0 || slots[i] == nil {
			continue
		}
		if r > uint64(len(claims)) {
			d.Fail("live claim %d of %d", r, len(claims))
			continue
		}
		slots[i].live = claims[r-1]
	}
	for range d.Count() {
		name := d.held()
		if ci := d.Ref(uint64(len(claims)), "claim"); d.Err == nil {
			if claims[ci].name == name {
				name = claims[ci].name
			}
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

// encoder and decoder add the cost index's own fields to the copy format.
type encoder struct{ *copycodec.Encoder }

func (e *encoder) t(v time.Time) { e.Int(nanos(v)) }

func (e *encoder) optional(v *float64) {
	e.Bool(v != nil)
	if v != nil {
		e.Float(*v)
	}
}

func (e *encoder) cost(c *events.Cost) {
	e.Bool(c != nil)
	if c == nil {
		return
	}
	e.optional(c.PricePerHour)
	e.optional(c.PowerWatts)
	e.optional(c.BootWatts)
	e.optional(c.EnergyPricePerKWh)
	e.Str(c.Currency)
}

func (e *encoder) rates(r rates) {
	e.Str(r.currency)
	e.Float(r.perSecond)
	e.Float(r.upWatts)
	e.Float(r.bootWatts)
	e.Float(r.energyPerJoule)
}

func (e *encoder) attribution(a attribution) {
	e.Str(a.group)
	e.Str(a.slot)
	e.Str(a.claim)
	e.Str(a.requester)
	e.Bool(a.booting)
	e.Str(a.unwanted)
	e.t(a.pausedUntil)
	e.rates(a.rates)
}

type decoder struct {
	*copycodec.Decoder
	// x, once its names are read, lends them: a string the fold keeps
	// that is one of them (a slot, a group, a requester) shares its bytes
	// instead of holding a copy per slot, segment and claim.
	x *Index
	// others are the other strings read more than once (currencies), held
	// once; a few at most.
	others []string
}

// maxOthers bounds decoder.others: strings past it are copied each time.
const maxOthers = 16

// held is the next string, shared with one the index already holds if
// it is the same: a name, a reason, Unclaimed or another string read
// before.
func (d *decoder) held() string {
	b := d.Bytes()
	if d.x != nil {
		if id, ok := d.x.nameIDs[string(b)]; ok {
			return d.x.names[id]
		}
	}
	if string(b) == Unclaimed {
		return Unclaimed
	}
	for _, r := range Reasons {
		if string(b) == r {
			return r
		}
	}
	for _, o := range d.others {
		if string(b) == o {
			return o
		}
	}
	s := string(b)
	if len(d.others) < maxOthers && len(s) <= 8 {
		d.others = append(d.others, s)
	}
	return s
}

func (d *decoder) t() time.Time { return fromNanos(d.Int()) }

func (d *decoder) optional() *float64 {
	if !d.Bool() {
		return nil
	}
	v := d.Float()
	return &v
}

func (d *decoder) cost() *events.Cost {
	if !d.Bool() {
		return nil
	}
	return &events.Cost{PricePerHour: d.optional(), PowerWatts: d.optional(), BootWatts: d.optional(), EnergyPricePerKWh: d.optional(), Currency: d.held()}
}

func (d *decoder) rates() rates {
	return rates{currency: d.held(), perSecond: d.Float(), upWatts: d.Float(), bootWatts: d.Float(), energyPerJoule: d.Float()}
}

func (d *decoder) attribution() attribution {
	a := attribution{group: d.held(), slot: d.held(), claim: d.held(), requester: d.held(), booting: d.Bool(), unwanted: d.held(), pausedUntil: d.t(), rates: d.rates()}
	if a.unwanted != "" && !slices.Contains(Reasons, a.unwanted) {
		d.Fail("unknown reason %q", a.unwanted)
	}
	return a
}
