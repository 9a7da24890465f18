package timeline

import (
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/claimstream/claimstream/internal/chunkfile"
)

// instants are the times (Unix ms) of the events the timeline index
// folded, in the log's order, for a window's count of events. A month at
// 10,000 slots is about a million of them, held for as long as serve
// runs: each chunk of instantsPerChunk keeps them as varint deltas from
// the one before (1 to 3 bytes for events up to minutes apart, against 8
// in an []int64; as barStream holds intervals), with the chunk's least
// and greatest instant, so a window's count reads only the chunks it cuts
// through.
//
// With a history file, a full chunk is written there and read back only
// when a count cuts through it, a copy is written or the window's start
// moves into it; the chunk still filling stays in memory. A chunk the file
// refuses stays in memory (err says why).
type instants struct {
	chunks  []instantChunk
	n       int
	history *chunkfile.File
	err     error // the history file's last refusal
}

type instantChunk struct {
	chunkfile.Chunk // signed varint deltas, the first from 0
	n               int
	last            int64 // the last instant, for the next delta
	lo, hi          int64 // the least and greatest instant
}

const instantsPerChunk = 4096

func (s *instants) len() int { return s.n }

// add appends ms.
func (s *instants) add(ms int64) {
	if len(s.chunks) == 0 || s.chunks[len(s.chunks)-1].n == instantsPerChunk {
		if len(s.chunks) > 0 {
			s.store(&s.chunks[len(s.chunks)-1])
		}
		s.chunks = append(s.chunks, instantChunk{lo: ms, hi: ms})
	}
	s.chunks[len(s.chunks)-1].add(ms)
	s.n++
}

func (c *instantChunk) add(ms int64) {
	c.B = binary.AppendVarint(c.B, ms-c.last)
	c.last = ms
	c.lo, c.hi = min(c.lo, ms), max(c.hi, ms)
	c.n++
}

// store moves full chunk c to the history file, or, with none or when it
// refuses it, keeps it in memory.
func (s *instants) store(c *instantChunk) {
	if err := s.history.Keep(&c.Chunk); err != nil {
		s.err = err // the file logs it
	}
}

// inMemory is the bytes of the full chunks held in memory (the last
// chunk is still filling).
func (s *instants) inMemory() int64 {
	var n int64
	for i := range max(len(s.chunks)-1, 0) {
		n += int64(s.chunks[i].InMemory())
	}
	return n
}

// bytes is chunk i's varints: its own, or read from the history file
// into *scratch.
func (s *instants) bytes(i int, scratch *[]byte) ([]byte, error) {
	b, err := s.history.Bytes(&s.chunks[i].Chunk, scratch)
	if err != nil {
		return nil, fmt.Errorf("timeline index: chunk %d of its event instants: %w", i, err)
	}
	return b, nil
}

// release gives back the history file's space of every chunk: the
// instants are dropped whole.
func (s *instants) release() {
	for i := range s.chunks {
		s.free(&s.chunks[i])
	}
}

// free gives back chunk c's space in the history file, if it is there.
// A file system without holes keeps it until the file is closed.
func (s *instants) free(c *instantChunk) { s.history.Drop(&c.Chunk) }

// sealLast drops the last chunk's spare room (after a copy's decode).
func (s *instants) sealLast() {
	if len(s.chunks) > 0 {
		s.chunks[len(s.chunks)-1].Seal()
	}
}

// each calls fn with every instant held, in order; its error is the
// history file's.
func (s *instants) each(fn func(int64)) error {
	var scratch []byte
	for i := range s.chunks {
		b, err := s.bytes(i, &scratch)
		if err != nil {
			return err
		}
		for ms := range deltasOf(b) {
			fn(ms)
		}
	}
	return nil
}

// deltasOf yields the instants of a chunk's varints in order (written by
// add only, and checked against their checksum when read back: every
// varint is whole).
func deltasOf(b []byte) iter.Seq[int64] {
	return func(yield func(int64) bool) {
		var at int64
		for len(b) > 0 {
			d, n := binary.Varint(b)
			b = b[n:]
			at += d
			if !yield(at) {
				return
			}
		}
	}
}

// count is how many instants held fall in (since, until]; its error is
// the history file's.
func (s *instants) count(since, until int64) (int, error) {
	total := 0
	var scratch []byte
	for i := range s.chunks {
		c := &s.chunks[i]
		switch {
		case c.hi <= since || c.lo > until:
		case c.lo > since && c.hi <= until:
			total += c.n
		default:
			b, err := s.bytes(i, &scratch)
			if err != nil {
				return 0, err
			}
			for ms := range deltasOf(b) {
				if ms > since && ms <= until {
					total++
				}
			}
		}
	}
	return total, nil
}

// dropThrough drops the instants from the first up to the first after
// cut (the log's order need not be the time's: one after cut keeps those
// behind it).
func (s *instants) dropThrough(cut int64) {
	whole := 0
	for whole < len(s.chunks) && s.chunks[whole].hi <= cut {
		s.n -= s.chunks[whole].n
		s.free(&s.chunks[whole])
		whole++
	}
	if whole > 0 {
		s.chunks = append(s.chunks[:0:0], s.chunks[whole:]...)
	}
	if len(s.chunks) == 0 || s.chunks[0].lo > cut {
		return
	}
	var scratch []byte
	b, err := s.bytes(0, &scratch)
	if err != nil {
		// Kept whole: its instants at or before cut fall before every
		// window a count is asked for.
		return
	}
	old, kept, keeping := &s.chunks[0], instantChunk{}, false
	for ms := range deltasOf(b) {
		if !keeping && ms > cut {
			keeping, kept.lo, kept.hi = true, ms, ms
		}
		if keeping {
			kept.add(ms)
		}
	}
	s.n -= old.n - kept.n
	s.free(old)
	if len(s.chunks) > 1 {
		s.store(&kept)
	}
	s.chunks[0] = kept
}
