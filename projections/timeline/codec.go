package timeline

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/internal/copycodec"
)

// The index's part of a snapshot: everything it needs to continue exactly
// where it stopped (each slot's intervals, claims and failures, the
// events' instants, the phase table) and the sequence of the last event it
// folded; the views are the snapshot's own. Layout: timelineCopyMagic, a
// version byte, the payload (varints, instants as deltas where they run
// in order), then a CRC-32C of everything before it.
const (
	timelineCopyMagic   = "CSTL"
	timelineCopyVersion = 3
)

// errCopyDamaged is wrapped by unmarshalTimelineIndex's errors: the
// bytes are not a part this version wrote, or not the whole of one.
var errCopyDamaged = errors.New("damaged timeline index part")

// marshal encodes what x holds; the caller holds x.mu. Its error is the
// history file's.
func (x *Index) marshal() ([]byte, error) {
	nbars := 0
	for _, l := range x.slots {
		nbars += l.bars.n
	}
	e := &tlEncoder{copycodec.NewEncoder(timelineCopyMagic, timelineCopyVersion, 64+x.eventsAt.len()*2+nbars*8)}
	if err := x.encode(e); err != nil {
		return nil, err
	}
	return e.Seal(), nil
}

// write writes what marshal returns to w as it is encoded; the caller
// holds x.mu.
func (x *Index) write(w io.Writer) error {
	e := &tlEncoder{copycodec.NewWriterEncoder(w, timelineCopyMagic, timelineCopyVersion)}
	if err := x.encode(e); err != nil {
		return err
	}
	return e.End()
}

// encode is the one writer of a part's payload; the caller holds x.mu.
func (x *Index) encode(e *tlEncoder) error {
	e.Uint(x.seq)
	e.t(x.heldFrom)
	e.t(x.newest)
	e.Uint(uint64(len(x.phases)))
	for _, p := range x.phases {
		e.Str(p)
	}
	e.Uint(uint64(x.eventsAt.len()))
	var prev int64
	if err := x.eventsAt.each(func(at int64) {
		e.Int(at - prev)
		prev = at
	}); err != nil {
		return err
	}

	names := make([]string, 0, len(x.slots))
	for name := range x.slots {
		names = append(names, name)
	}
	slices.Sort(names)
	e.Uint(uint64(len(names)))
	var scratch []byte // a claim's name, made for the copy
	for _, name := range names {
		l := x.slots[name]
		e.Str(name)
		e.t(l.declared)
		e.t(l.retired)
		e.Uint(uint64(l.claims.Len()))
		for i := range l.claims.Len() {
			scratch = l.claims.AppendAt(scratch[:0], l.name, i)
			e.StrBytes(scratch)
		}
		e.Uint(uint64(l.bars.n))
		prev = 0
		for b := range l.bars.all() {
			// From the previous interval's end: mostly 0 (one phase
			// follows another), one byte.
			e.Int(b.start - prev)
			e.Int(b.end - b.start)
			e.Uint(uint64(b.claim + 1))
			e.Uint(uint64(b.phase))
			prev = b.end
		}
		e.Uint(uint64(l.open.phase))
		if l.open.phase != noPhase {
			e.Int(l.open.start)
			e.Uint(uint64(l.open.claim + 1))
		}
		e.Uint(uint64(len(l.fails)))
		for _, f := range l.fails {
			e.t(f.at)
			e.Str(f.claim)
			e.Str(f.reason)
		}
	}
	return nil
}

// timelineContents is what a copy holds: the fields of a Index it
// continues from.
type timelineContents struct {
	seq      uint64
	heldFrom time.Time
	newest   time.Time
	slots    map[string]*slotLine
	eventsAt instants
	phases   []string
}

// unmarshalTimelineIndex decodes a copy marshal wrote. A copy that is cut
// short, altered (its checksum), of another version, or not
// self-consistent is refused with an error wrapping
// errCopyDamaged.
func unmarshalTimelineIndex(b []byte) (*timelineContents, error) {
	cd, err := copycodec.Open(b, timelineCopyMagic, timelineCopyVersion, "a timeline index copy")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCopyDamaged, err)
	}
	return unmarshalTimeline(cd, nil)
}

// unmarshalTimelineFrom decodes a copy of size bytes as
// unmarshalTimelineIndex does, as it is read from r; full chunks of its
// event instants go to history (nil: memory).
func unmarshalTimelineFrom(r io.Reader, size int, history *chunkfile.File) (*timelineContents, error) {
	cd, err := copycodec.OpenReader(r, size, timelineCopyMagic, timelineCopyVersion, "a timeline index copy")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCopyDamaged, err)
	}
	return unmarshalTimeline(cd, history)
}

func unmarshalTimeline(cd *copycodec.Decoder, history *chunkfile.File) (*timelineContents, error) {
	d := &tlDecoder{cd}
	c := decodeTimelineContents(d, history)
	if err := d.End(); err != nil {
		if c != nil {
			c.eventsAt.release()
		}
		return nil, fmt.Errorf("%w: %w", errCopyDamaged, err)
	}
	return c, nil
}

func decodeTimelineContents(d *tlDecoder, history *chunkfile.File) *timelineContents {
	c := &timelineContents{slots: map[string]*slotLine{}, eventsAt: instants{history: history}}
	c.seq = d.Uint()
	c.heldFrom, c.newest = d.t(), d.t()
	np := d.Count()
	if np == 0 || np > 256 {
		d.Fail("%d phases", np)
		return nil
	}
	seen := map[string]bool{}
	for range np {
		p := d.Str()
		if seen[p] {
			d.Fail("phase %q twice", p)
		}
		seen[p] = true
		c.phases = append(c.phases, p)
	}
	if d.Err != nil || c.phases[0] != "" {
		d.Fail("phase 0 is not no phase")
		return nil
	}
	n := d.Count()
	var at int64
	for range n {
		at += d.Int() // in the log's order, which need not be the time's
		c.eventsAt.add(at)
	}
	c.eventsAt.sealLast()
	ns := d.Count()
	prevName := ""
	for i := range ns {
		name := d.Str()
		if i > 0 && name <= prevName {
			d.Fail("slots out of order at %q", name)
		}
		prevName = name
		l := &slotLine{name: name, declared: d.t(), retired: d.t()}
		nc := d.Count()
		for range nc {
			l.claims.Append(name, d.Str())
		}
		claim := func() int32 { return int32(d.Ref(uint64(nc)+1, "claim")) - 1 }
		nb := d.Count()
		var prevEnd int64
		for range nb {
			br := indexBar{start: prevEnd + d.Int()}
			br.end = br.start + d.Int()
			prevEnd = br.end
			br.claim = claim()
			br.phase = uint8(d.Ref(uint64(np), "phase"))
			if br.end <= br.start || br.phase == noPhase {
				d.Fail("slot %q: an interval that ends before it starts or has no phase", name)
			}
			l.bars.add(br)
		}
		l.bars.b = append(l.bars.b[:0:0], l.bars.b...) // held for long: no room to spare
		l.open = noBar
		if p := uint8(d.Ref(uint64(np), "phase")); p != noPhase {
			l.open.phase = p
			l.open.start = d.Int()
			l.open.claim = claim()
		}
		nf := d.Count()
		for range nf {
			l.fails = append(l.fails, indexFail{at: d.t(), claim: d.Str(), reason: d.Str()})
		}
		if d.Err != nil {
			return nil
		}
		c.slots[name] = l
	}
	return c
}

// tlEncoder and tlDecoder add the timeline index's instants to the copy
// format.
type tlEncoder struct{ *copycodec.Encoder }

// t encodes an instant: 0 for the zero time, else 1 and its Unix
// nanoseconds.
func (e *tlEncoder) t(v time.Time) {
	if v.IsZero() {
		e.Uint(0)
		return
	}
	e.Uint(1)
	e.Int(v.UnixNano())
}

type tlDecoder struct{ *copycodec.Decoder }

func (d *tlDecoder) t() time.Time {
	switch d.Uint() {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, d.Int()).UTC()
	}
	d.Fail("bad instant")
	return time.Time{}
}
