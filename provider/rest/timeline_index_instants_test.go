package rest

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// instants hold what an []int64 would, through adds that run forward,
// back and far ahead, and drops from the front of any size.
func TestInstantsHoldWhatASliceWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	var got instants
	var want []int64
	at := int64(1_767_225_600_000)
	check := func(step int) {
		t.Helper()
		if got.len() != len(want) {
			t.Fatalf("step %d: %d instants held, want %d", step, got.len(), len(want))
		}
		for k, w := range want {
			if g := got.at(k); g != w {
				t.Fatalf("step %d: instant %d is %d, want %d", step, k, g, w)
			}
		}
		for range 20 {
			ms := at - int64(rng.IntN(3_000_000))
			if g, w := got.after(ms), sort.Search(len(want), func(k int) bool { return want[k] > ms }); g != w {
				t.Fatalf("step %d: after(%d) = %d, want %d", step, ms, g, w)
			}
		}
	}
	for step := range 400 {
		switch r := rng.IntN(100); {
		case r < 2:
			at += 60 * 24 * 3600 * 1000 // past what 4 bytes hold
		case r < 4:
			at -= int64(rng.IntN(100_000)) // the log's order need not be the time's
		}
		for range rng.IntN(3 * instantsPerChunk / 2) {
			at += int64(rng.IntN(2000))
			got.add(at)
			want = append(want, at)
		}
		if rng.IntN(3) == 0 {
			k := rng.IntN(len(want) + 1)
			got.dropFirst(k)
			want = want[k:]
		}
		check(step)
	}
}

// A chunk of instants in time order takes 4 bytes each.
func TestInstantsInOrderTakeFourBytesEach(t *testing.T) {
	var s instants
	for k := range 10 * instantsPerChunk {
		s.add(int64(1_767_225_600_000 + k*250))
	}
	for i, c := range s.chunks {
		if c.wide != nil || len(c.off) != instantsPerChunk {
			t.Fatalf("chunk %d: wide %v, %d offsets; want %d 4-byte offsets", i, c.wide != nil, len(c.off), instantsPerChunk)
		}
	}
}
