package timeline

import (
	"encoding/binary"
	"iter"
)

// instants are the times (Unix ms) of the events the timeline index
// folded, in the log's order, for a window's count of events. A month at
// 10,000 slots is about a million of them, held for as long as serve
// runs: each chunk of instantsPerChunk keeps them as varint deltas from
// the one before (1 to 3 bytes for events up to minutes apart, against 8
// in an []int64; as barStream holds intervals), with the chunk's least
// and greatest instant, so a window's count reads only the chunks it cuts
// through.
type instants struct {
	chunks []instantChunk
	n      int
}

type instantChunk struct {
	b      []byte // signed varint deltas, the first from 0
	n      int
	last   int64 // the last instant, for the next delta
	lo, hi int64 // the least and greatest instant
}

const instantsPerChunk = 4096

func (s *instants) len() int { return s.n }

// add appends ms.
func (s *instants) add(ms int64) {
	if len(s.chunks) == 0 || s.chunks[len(s.chunks)-1].n == instantsPerChunk {
		if len(s.chunks) > 0 {
			s.chunks[len(s.chunks)-1].seal()
		}
		s.chunks = append(s.chunks, instantChunk{lo: ms, hi: ms})
	}
	s.chunks[len(s.chunks)-1].add(ms)
	s.n++
}

func (c *instantChunk) add(ms int64) {
	c.b = binary.AppendVarint(c.b, ms-c.last)
	c.last = ms
	c.lo, c.hi = min(c.lo, ms), max(c.hi, ms)
	c.n++
}

// seal drops a chunk's spare room: it is held for long.
func (c *instantChunk) seal() {
	b := make([]byte, len(c.b)) // exactly: append would round up to a size class
	copy(b, c.b)
	c.b = b
}

// sealLast drops the last chunk's spare room (after a copy's decode).
func (s *instants) sealLast() {
	if len(s.chunks) > 0 {
		s.chunks[len(s.chunks)-1].seal()
	}
}

// all yields every instant held, in order.
func (s *instants) all() iter.Seq[int64] {
	return func(yield func(int64) bool) {
		for i := range s.chunks {
			for ms := range s.chunks[i].all() {
				if !yield(ms) {
					return
				}
			}
		}
	}
}

// all yields the chunk's instants in order (written by add only: every
// varint is whole).
func (c *instantChunk) all() iter.Seq[int64] {
	return func(yield func(int64) bool) {
		var at int64
		for b := c.b; len(b) > 0; {
			d, n := binary.Varint(b)
			b = b[n:]
			at += d
			if !yield(at) {
				return
			}
		}
	}
}

// count is how many instants held fall in (since, until].
func (s *instants) count(since, until int64) int {
	total := 0
	for i := range s.chunks {
		c := &s.chunks[i]
		switch {
		case c.hi <= since || c.lo > until:
		case c.lo > since && c.hi <= until:
			total += c.n
		default:
			for ms := range c.all() {
				if ms > since && ms <= until {
					total++
				}
			}
		}
	}
	return total
}

// dropThrough drops the instants from the first up to the first after
// cut (the log's order need not be the time's: one after cut keeps those
// behind it).
func (s *instants) dropThrough(cut int64) {
	whole := 0
	for whole < len(s.chunks) && s.chunks[whole].hi <= cut {
		s.n -= s.chunks[whole].n
		whole++
	}
	if whole > 0 {
		s.chunks = append(s.chunks[:0:0], s.chunks[whole:]...)
	}
	if len(s.chunks) == 0 || s.chunks[0].lo > cut {
		return
	}
	old, kept, keeping := &s.chunks[0], instantChunk{}, false
	for ms := range old.all() {
		if !keeping && ms > cut {
			keeping, kept.lo, kept.hi = true, ms, ms
		}
		if keeping {
			kept.add(ms)
		}
	}
	s.n -= old.n - kept.n
	if len(s.chunks) > 1 {
		kept.seal()
	}
	s.chunks[0] = kept
}
