package cost

import (
	"encoding/binary"
	"iter"

	"github.com/claimstream/claimstream/internal/chunkfile"
)

// spanChunk holds up to spansPerChunk spans, in the order the fold
// accrued them, as a run of varints: the span's from as a signed delta
// from the previous span's (the first from 0), its length to-from, its
// owner, and its price with the flags moved to the low bits, as
// barStream holds the timeline's intervals. A month at 10,000 slots is
// some 450,000 spans held for as long as serve runs: 10 to 18 bytes each
// here (instants in nanoseconds), 24 in a span. A report walks a chunk
// from its start (spansOf); nothing looks a span up by its position.
//
// An index with a history file (Index.history) keeps a full chunk there.
type spanChunk struct {
	chunkfile.Chunk
	n        int
	lastFrom int64 // from of the last span appended
}

// priceFlagBits are the flags' bits of span.price (spanUp, spanBooting
// and the reason), moved below the price's index in a chunk so a small index stays a
// short varint.
const priceFlagBits = 32 - priceBits

// add appends sp.
func (c *spanChunk) add(sp span) {
	c.B = binary.AppendVarint(c.B, sp.from-c.lastFrom)
	c.B = binary.AppendUvarint(c.B, uint64(sp.to-sp.from)) // wraps back exactly in next
	c.B = binary.AppendUvarint(c.B, uint64(sp.owner))
	c.B = binary.AppendUvarint(c.B, packPrice(sp.price))
	c.lastFrom = sp.from
	c.n++
}

// packPrice is a span's or mark's price with its flags moved below the
// price's index, so a small index stays a short varint; unpackPrice
// undoes it.
func packPrice(p uint32) uint64 { return uint64(p&priceMask)<<priceFlagBits | uint64(p>>priceBits) }

func unpackPrice(v uint64) uint32 {
	return uint32(v>>priceFlagBits) | uint32(v&(1<<priceFlagBits-1))<<priceBits
}

// spansOf yields the spans of a chunk's bytes in order. The bytes are the
// index's own (add wrote them; read back from the history file, they are
// checked against their checksum): every varint is whole.
func spansOf(b []byte) iter.Seq[span] {
	return func(yield func(span) bool) {
		from := int64(0)
		for len(b) > 0 {
			d, n := binary.Varint(b)
			b = b[n:]
			from += d
			length, n := binary.Uvarint(b)
			b = b[n:]
			owner, n := binary.Uvarint(b)
			b = b[n:]
			price, n := binary.Uvarint(b)
			b = b[n:]
			sp := span{from: from, to: from + int64(length), owner: uint32(owner), price: unpackPrice(price)}
			if !yield(sp) {
				return
			}
		}
	}
}

// markChunk holds up to chunkSpans boot marks, in the order the fold
// counted them, as varints: the mark's instant as a signed delta from the
// previous mark's (the first from 0), its owner and its price as a span
// chunk holds them. Every report walks all of them; an index with a
// history file keeps a full chunk there, as it does spans.
type markChunk struct {
	chunkfile.Chunk
	lastAt int64 // at of the last mark appended
}

func (c *markChunk) add(m bootMark) {
	c.B = binary.AppendVarint(c.B, m.at-c.lastAt)
	c.B = binary.AppendUvarint(c.B, uint64(m.owner))
	c.B = binary.AppendUvarint(c.B, packPrice(m.price))
	c.lastAt = m.at
}

// marksOf yields the marks of a chunk's bytes in order (as spansOf).
func marksOf(b []byte) iter.Seq[bootMark] {
	return func(yield func(bootMark) bool) {
		at := int64(0)
		for len(b) > 0 {
			d, n := binary.Varint(b)
			b = b[n:]
			at += d
			owner, n := binary.Uvarint(b)
			b = b[n:]
			price, n := binary.Uvarint(b)
			b = b[n:]
			if !yield(bootMark{at: at, owner: uint32(owner), price: unpackPrice(price)}) {
				return
			}
		}
	}
}
