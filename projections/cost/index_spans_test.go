package cost

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSpanChunkReadsBackWhatWasAdded: a chunk's varints give back every
// span as added, at the extremes of each field too (an instant saturated
// by nanos, a from that goes back, every flag of a price).
func TestSpanChunkReadsBackWhatWasAdded(t *testing.T) {
	want := []span{
		{from: 1_764_000_000_000_000_000, to: 1_764_000_001_000_000_000, owner: 0, price: 0},
		{from: 1_763_999_000_000_000_000, to: 1_764_000_005_000_000_000, owner: 140_000, price: spanUp | 3},
		{from: math.MinInt64, to: math.MaxInt64, owner: math.MaxUint32, price: math.MaxUint32},
		{from: math.MaxInt64 - 1, to: math.MaxInt64, owner: 7, price: priceMask | spanBooting | uint32(len(Reasons))<<reasonShift},
		{from: 0, to: 1, owner: 1, price: spanUp | spanBooting | 1<<reasonShift},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		from := r.Int64N(1 << 61)
		want = append(want, span{from: from, to: from + 1 + r.Int64N(1<<40), owner: r.Uint32(), price: r.Uint32()})
	}
	var c spanChunk
	for _, sp := range want {
		c.add(sp)
	}
	c.Seal()
	if c.n != len(want) || len(c.B) != cap(c.B) {
		t.Fatalf("chunk holds %d spans in %d bytes of %d; want %d and no spare room", c.n, len(c.B), cap(c.B), len(want))
	}
	got := slices.Collect(spansOf(c.B))
	for i, w := range want {
		if i >= len(got) {
			t.Fatalf("span %d: none, want %+v", i, w)
		}
		if got[i] != w {
			t.Fatalf("span %d: got %+v, want %+v", i, got[i], w)
		}
	}
	if len(got) > len(want) {
		t.Fatalf("a span past the last: %+v", got[len(want)])
	}
}

// TestSpanChunkIsSmallerThanSpans: spans as a slot's day makes them (a
// few seconds to hours long, seconds apart, owners in the hundred
// thousands) take at most 18 bytes each, against 24.
func TestSpanChunkIsSmallerThanSpans(t *testing.T) {
	var c spanChunk
	at := int64(1_764_000_000_000_000_000)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range spansPerChunk {
		at += r.Int64N(10e9)
		c.add(span{from: at, to: at + r.Int64N(8*3600e9), owner: uint32(100_000 + i), price: spanUp | uint32(r.IntN(200))})
	}
	if per := float64(len(c.B)) / float64(c.n); per > 18 {
		t.Fatalf("%.1f bytes a span, want at most 18", per)
	}
}
