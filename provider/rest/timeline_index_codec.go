package rest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/claimstream/claimstream/projections"
)

// A saved copy of a TimelineIndex: everything it needs to continue exactly
// where it stopped (its views, each slot's intervals, claims and failures,
// the events' instants, the phase table) and the sequence of the last event
// it folded. Layout: timelineCopyMagic, a version byte, the payload
// (varints, instants as deltas where they run in order, the views as their
// checkpoint JSON), then a CRC-32C of everything before it.
const (
	timelineCopyMagic   = "CSTL"
	timelineCopyVersion = 2
)

var timelineCopyCRC = crc32.MakeTable(crc32.Castagnoli)

// ErrTimelineCopyDamaged is wrapped by unmarshalTimelineIndex's errors: the
// bytes are not a copy this version wrote, or not the whole of one.
var ErrTimelineCopyDamaged = errors.New("damaged timeline index copy")

// marshal encodes what x holds; the caller holds x.mu.
func (x *TimelineIndex) marshal() ([]byte, error) {
	views, err := json.Marshal(x.st)
	if err != nil {
		return nil, fmt.Errorf("encode the timeline index's views: %w", err)
	}
	nbars := 0
	for _, l := range x.slots {
		nbars += l.bars.n
	}
	e := &tlEncoder{b: make([]byte, 0, 64+len(views)+len(x.eventsAt)*2+nbars*8)}
	e.b = append(e.b, timelineCopyMagic...)
	e.b = append(e.b, timelineCopyVersion)
	e.u(x.st.Seq)
	e.t(x.heldFrom)
	e.t(x.newest)
	e.u(uint64(len(x.phases)))
	for _, p := range x.phases {
		e.s(p)
	}
	e.u(uint64(len(x.eventsAt)))
	var prev int64
	for _, at := range x.eventsAt {
		e.i(at - prev)
		prev = at
	}
	e.u(uint64(len(views)))
	e.b = append(e.b, views...)

	names := make([]string, 0, len(x.slots))
	for name := range x.slots {
		names = append(names, name)
	}
	slices.Sort(names)
	e.u(uint64(len(names)))
	for _, name := range names {
		l := x.slots[name]
		e.s(name)
		e.t(l.declared)
		e.t(l.retired)
		e.u(uint64(len(l.claims)))
		for _, c := range l.claims {
			e.s(c)
		}
		e.u(uint64(l.bars.n))
		prev = 0
		for b := range l.bars.all() {
			// From the previous interval's end: mostly 0 (one phase
			// follows another), one byte.
			e.i(b.start - prev)
			e.i(b.end - b.start)
			e.u(uint64(b.claim + 1))
			e.u(uint64(b.phase))
			prev = b.end
		}
		e.u(uint64(l.open.phase))
		if l.open.phase != noPhase {
			e.i(l.open.start)
			e.u(uint64(l.open.claim + 1))
		}
		e.u(uint64(len(l.fails)))
		for _, f := range l.fails {
			e.t(f.at)
			e.s(f.claim)
			e.s(f.reason)
		}
	}
	return binary.LittleEndian.AppendUint32(e.b, crc32.Checksum(e.b, timelineCopyCRC)), nil
}

// timelineContents is what a copy holds: the fields of a TimelineIndex it
// continues from.
type timelineContents struct {
	st       *projections.State
	heldFrom time.Time
	newest   time.Time
	slots    map[string]*slotLine
	eventsAt []int64
	phases   []string
}

// unmarshalTimelineIndex decodes a copy marshal wrote. A copy that is cut
// short, altered (its checksum), of another version, or not
// self-consistent is refused with an error wrapping
// ErrTimelineCopyDamaged.
func unmarshalTimelineIndex(b []byte) (*timelineContents, error) {
	if len(b) < len(timelineCopyMagic)+1+4 || string(b[:len(timelineCopyMagic)]) != timelineCopyMagic {
		return nil, fmt.Errorf("%w: not a timeline index copy", ErrTimelineCopyDamaged)
	}
	if v := b[len(timelineCopyMagic)]; v != timelineCopyVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrTimelineCopyDamaged, v, timelineCopyVersion)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, timelineCopyCRC) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrTimelineCopyDamaged)
	}
	d := &tlDecoder{b: body[len(timelineCopyMagic)+1:]}
	c := decodeTimelineContents(d)
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the end", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTimelineCopyDamaged, d.err)
	}
	return c, nil
}

func decodeTimelineContents(d *tlDecoder) *timelineContents {
	c := &timelineContents{slots: map[string]*slotLine{}}
	seq := d.u()
	c.heldFrom, c.newest = d.t(), d.t()
	np := d.count()
	if np == 0 || np > 256 {
		d.fail("%d phases", np)
		return nil
	}
	seen := map[string]bool{}
	for range np {
		p := d.s()
		if seen[p] {
			d.fail("phase %q twice", p)
		}
		seen[p] = true
		c.phases = append(c.phases, p)
	}
	if d.err != nil || c.phases[0] != "" {
		d.fail("phase 0 is not no phase")
		return nil
	}
	n := d.count()
	c.eventsAt = make([]int64, 0, n)
	var at int64
	for range n {
		at += d.i() // in the log's order, which need not be the time's
		c.eventsAt = append(c.eventsAt, at)
	}
	views := d.bytes()
	if d.err != nil {
		return nil
	}
	c.st = projections.NewState()
	if err := json.Unmarshal(views, c.st); err != nil {
		d.fail("views: %v", err)
		return nil
	}
	c.st.Reindex()
	if c.st.Seq != seq {
		d.fail("its views are at seq %d, the copy says %d", c.st.Seq, seq)
		return nil
	}
	ns := d.count()
	prevName := ""
	for i := range ns {
		name := d.s()
		if i > 0 && name <= prevName {
			d.fail("slots out of order at %q", name)
		}
		prevName = name
		l := &slotLine{declared: d.t(), retired: d.t()}
		nc := d.count()
		for range nc {
			l.claims = append(l.claims, d.s())
		}
		claim := func() int32 { return int32(d.ref(uint64(nc)+1, "claim")) - 1 }
		nb := d.count()
		var prevEnd int64
		for range nb {
			br := indexBar{start: prevEnd + d.i()}
			br.end = br.start + d.i()
			prevEnd = br.end
			br.claim = claim()
			br.phase = uint8(d.ref(uint64(np), "phase"))
			if br.end <= br.start || br.phase == noPhase {
				d.fail("slot %q: an interval that ends before it starts or has no phase", name)
			}
			l.bars.add(br)
		}
		l.open = noBar
		if p := uint8(d.ref(uint64(np), "phase")); p != noPhase {
			l.open.phase = p
			l.open.start = d.i()
			l.open.claim = claim()
		}
		nf := d.count()
		for range nf {
			l.fails = append(l.fails, indexFail{at: d.t(), claim: d.s(), reason: d.s()})
		}
		if d.err != nil {
			return nil
		}
		c.slots[name] = l
	}
	return c
}

type tlEncoder struct{ b []byte }

func (e *tlEncoder) u(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *tlEncoder) i(v int64)  { e.b = binary.AppendVarint(e.b, v) }
func (e *tlEncoder) s(v string) { e.u(uint64(len(v))); e.b = append(e.b, v...) }

// t encodes an instant: 0 for the zero time, else 1 and its Unix
// nanoseconds.
func (e *tlEncoder) t(v time.Time) {
	if v.IsZero() {
		e.u(0)
		return
	}
	e.u(1)
	e.i(v.UnixNano())
}

type tlDecoder struct {
	b   []byte
	err error
}

func (d *tlDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
	d.b = nil
}

func (d *tlDecoder) u() uint64 {
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

func (d *tlDecoder) i() int64 {
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

// count is a number of elements to come; each takes at least a byte, so
// a count past the bytes left is damage, not a huge allocation.
func (d *tlDecoder) count() int {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.fail("a count of %d with %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

// ref is a reference into a table of n.
func (d *tlDecoder) ref(n uint64, what string) uint64 {
	v := d.u()
	if v >= n {
		d.fail("%s %d of %d", what, v, n)
		return 0
	}
	return v
}

func (d *tlDecoder) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *tlDecoder) s() string { return string(d.bytes()) }

func (d *tlDecoder) t() time.Time {
	switch d.u() {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, d.i()).UTC()
	}
	d.fail("bad instant")
	return time.Time{}
}
