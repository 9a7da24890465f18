package rest

import (
	"math"
	"sort"
)

// instants are the times (Unix ms) of the events the timeline index
// folded, in the log's order, for a window's count of events. A month at
// 10,000 slots is about a million of them, held for as long as serve
// runs: each chunk of instantsPerChunk keeps 4-byte offsets from its first
// instant, half of an []int64. A chunk whose events run back before its
// first one or span more than 49 days keeps 8-byte instants instead.
type instants struct {
	chunks []instantChunk
	// skip is how many of the first chunk's instants were dropped; n how
	// many are held after them.
	skip, n int
}

type instantChunk struct {
	base int64
	off  []uint32 // from base; nil once the chunk is wide
	wide []int64
}

const instantsPerChunk = 4096

func (s *instants) len() int { return s.n }

// at is the k-th instant held.
func (s *instants) at(k int) int64 {
	k += s.skip
	c := &s.chunks[k/instantsPerChunk]
	if c.wide != nil {
		return c.wide[k%instantsPerChunk]
	}
	return c.base + int64(c.off[k%instantsPerChunk])
}

// add appends ms.
func (s *instants) add(ms int64) {
	if s.skip+s.n == len(s.chunks)*instantsPerChunk {
		s.chunks = append(s.chunks, instantChunk{base: ms, off: make([]uint32, 0, instantsPerChunk)})
	}
	c := &s.chunks[len(s.chunks)-1]
	s.n++
	if c.wide == nil {
		if d := ms - c.base; d >= 0 && d <= math.MaxUint32 {
			c.off = append(c.off, uint32(d))
			return
		}
		c.wide = make([]int64, len(c.off), instantsPerChunk)
		for i, o := range c.off {
			c.wide[i] = c.base + int64(o)
		}
		c.off = nil
	}
	c.wide = append(c.wide, ms)
}

// dropFirst drops the first k instants held.
func (s *instants) dropFirst(k int) {
	if k <= 0 {
		return
	}
	k = min(k, s.n)
	total := s.skip + k
	if whole := total / instantsPerChunk; whole > 0 {
		s.chunks = append(s.chunks[:0:0], s.chunks[whole:]...)
	}
	s.skip, s.n = total%instantsPerChunk, s.n-k
}

// after is the index of the first instant held after ms, as sort.Search
// finds it (the log's order need not be the time's).
func (s *instants) after(ms int64) int {
	return sort.Search(s.n, func(k int) bool { return s.at(k) > ms })
}
