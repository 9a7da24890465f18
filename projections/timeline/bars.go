package timeline

import (
	"encoding/binary"
	"iter"
)

// barStream is a slot's closed intervals, in the order they closed, held
// as varints: each interval's start from the previous one's end (mostly 0:
// one phase follows another), its length, its claim + 1 and its phase
// code, 6 to 10 bytes where an indexBar takes 24. The index holds hundreds
// of thousands of them for as long as serve runs (a month at 10,000
// slots); a timeline request reads a slot's intervals in order anyway.
type barStream struct {
	b []byte
	n int
	// firstEnd is the end of the first interval: prune passes over a slot
	// whose first interval ends after its cut without reading the rest.
	firstEnd int64
	// lastEnd is the end of the last interval, which the next one's start
	// is written from.
	lastEnd int64
}

// add appends br, which ends after it starts (close keeps no other).
func (s *barStream) add(br indexBar) {
	s.b = binary.AppendVarint(s.b, br.start-s.lastEnd)
	s.b = binary.AppendUvarint(s.b, uint64(br.end-br.start))
	s.b = binary.AppendUvarint(s.b, uint64(br.claim+1))
	s.b = append(s.b, br.phase)
	if s.n == 0 {
		s.firstEnd = br.end
	}
	s.n++
	s.lastEnd = br.end
}

// all yields the intervals in order.
func (s *barStream) all() iter.Seq[indexBar] {
	return func(yield func(indexBar) bool) {
		b, prev := s.b, int64(0)
		for len(b) > 0 {
			// Written by add only: every varint is whole.
			delta, n := binary.Varint(b)
			b = b[n:]
			length, n := binary.Uvarint(b)
			b = b[n:]
			claim, n := binary.Uvarint(b)
			b = b[n:]
			br := indexBar{start: prev + delta, claim: int32(claim) - 1, phase: b[0]}
			b = b[1:]
			br.end = br.start + int64(length)
			prev = br.end
			if !yield(br) {
				return
			}
		}
	}
}

// list is the intervals as a slice (tests, and prune's rewrite).
func (s *barStream) list() []indexBar {
	out := make([]indexBar, 0, s.n)
	for br := range s.all() {
		out = append(out, br)
	}
	return out
}

// dropBefore drops the slot's intervals that end at or before cutNs and
// the claims no kept interval refers to, renumbering the rest: it rewrites
// the stream, so prune calls it only when there is something to drop.
func (l *slotLine) dropBefore(cutNs int64) {
	bars := l.bars.list()
	i := 0
	for i < len(bars) && bars[i].end <= cutNs {
		i++
	}
	bars = bars[i:]
	first := int32(l.claims.Len())
	for _, br := range bars {
		if br.claim >= 0 {
			first = br.claim
			break
		}
	}
	if l.open.claim >= 0 {
		first = min(first, l.open.claim)
	}
	l.bars = barStream{}
	for _, br := range bars {
		if br.claim >= 0 {
			br.claim -= first
		}
		l.bars.add(br)
	}
	l.bars.b = append(l.bars.b[:0:0], l.bars.b...) // no room to spare
	if first > 0 {
		l.claims.DropFirst(int(first))
		if l.open.claim >= 0 {
			l.open.claim -= first
		}
	}
}
