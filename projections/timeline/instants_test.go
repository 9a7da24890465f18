package timeline

import (
	"math/rand/v2"
	"testing"

	"github.com/claimstream/claimstream/internal/chunkfile"
)

// instants hold what an []int64 would, through adds that run forward,
// back and far ahead, and drops from the front at any cut: a window's
// count is the slice's, and a drop takes the slice's longest prefix at or
// before the cut.
func TestInstantsHoldWhatASliceWould(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { instantsHoldWhatASliceWould(t, &instants{}) })
	t.Run("in a history file", func(t *testing.T) {
		history, err := chunkfile.Open(t.TempDir(), "timeline")
		if err != nil {
			t.Fatal(err)
		}
		defer history.Close()
		s := instants{history: history}
		instantsHoldWhatASliceWould(t, &s)
		if s.inMemory() != 0 || s.err != nil || history.Size() == 0 {
			t.Fatalf("%d bytes of full chunks in memory (%v), %d on disk: want them all on disk", s.inMemory(), s.err, history.Size())
		}
		// The chunks dropped gave their space back: the file holds the
		// chunks held, no more.
		var held int64
		for _, c := range s.chunks {
			held += int64(c.OnDisk())
		}
		if history.Size() != held {
			t.Fatalf("the history file holds %d bytes for %d bytes of chunks", history.Size(), held)
		}
	})
}

func instantsHoldWhatASliceWould(t *testing.T, got *instants) {
	rng := rand.New(rand.NewPCG(3, 7))
	var want []int64
	at := int64(1_767_225_600_000)
	check := func(step int) {
		t.Helper()
		if got.len() != len(want) {
			t.Fatalf("step %d: %d instants held, want %d", step, got.len(), len(want))
		}
		k := 0
		if err := got.each(func(ms int64) {
			if k >= len(want) || ms != want[k] {
				t.Fatalf("step %d: instant %d is %d, want %v", step, k, ms, want[min(k, len(want)-1)])
			}
			k++
		}); err != nil {
			t.Fatal(err)
		}
		if k != len(want) {
			t.Fatalf("step %d: all gave %d instants, want %d", step, k, len(want))
		}
		for range 20 {
			since := at - int64(rng.IntN(3_000_000))
			until := since + int64(rng.IntN(3_000_000))
			w := 0
			for _, ms := range want {
				if ms > since && ms <= until {
					w++
				}
			}
			if g, err := got.count(since, until); err != nil || g != w {
				t.Fatalf("step %d: count(%d, %d) = %d, want %d", step, since, until, g, w)
			}
		}
	}
	for step := range 400 {
		switch r := rng.IntN(100); {
		case r < 2:
			at += 60 * 24 * 3600 * 1000 // a long gap
		case r < 4:
			at -= int64(rng.IntN(100_000)) // the log's order need not be the time's
		}
		for range rng.IntN(3 * instantsPerChunk / 2) {
			at += int64(rng.IntN(2000))
			got.add(at)
			want = append(want, at)
		}
		if rng.IntN(3) == 0 && len(want) > 0 {
			cut := want[rng.IntN(len(want))] + int64(rng.IntN(3000)) - 1500
			got.dropThrough(cut)
			k := 0
			for k < len(want) && want[k] <= cut {
				k++
			}
			want = want[k:]
		}
		check(step)
	}
}

// Instants seconds apart take 2 bytes each, a quarter of an []int64.
func TestInstantsSecondsApartTakeTwoBytesEach(t *testing.T) {
	var s instants
	for k := range 10 * instantsPerChunk {
		s.add(int64(1_767_225_600_000 + k*2600))
	}
	s.sealLast()
	bytes := 0
	for _, c := range s.chunks {
		bytes += cap(c.B)
	}
	if per := float64(bytes) / float64(s.len()); per > 2.01 {
		t.Fatalf("%.2f bytes an instant, want 2", per)
	}
}
