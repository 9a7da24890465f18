package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// writeSlots appends one ClaimCreated to each of n slots s00, s01, ...: the
// event of slot sK lands at seq K+1.
func writeSlots(t *testing.T, st *eventlog.Store, n int) {
	t.Helper()
	for i := range n {
		s := fmt.Sprintf("s%02d", i)
		if _, err := st.Append(context.Background(), events.SlotAggregate(s), 0, eventstest.Created(s, "c-"+s)); err != nil {
			t.Fatal(err)
		}
	}
}

// readBounded reads from..to and fails the test if Read has not returned
// well within a minute (before gaps were detected it waited forever).
func readBounded(t *testing.T, st *eventlog.Store, from, to uint64) ([]uint64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var seqs []uint64
	err := st.Read(ctx, from, to, func(e events.Event) error { seqs = append(seqs, e.Seq); return nil })
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read(%d, %d) did not end: %v", from, to, err)
	}
	return seqs, err
}

func seqRange(first, last uint64, skip ...uint64) []uint64 {
	var out []uint64
	for s := first; s <= last; s++ {
		if !slices.Contains(skip, s) {
			out = append(out, s)
		}
	}
	return out
}

func wantGaps(t *testing.T, err error, want eventlog.Gaps, msg string) {
	t.Helper()
	var ge *eventlog.GapError
	if !errors.As(err, &ge) {
		t.Fatalf("want a *GapError, got %v", err)
	}
	if !slices.Equal(ge.Gaps, want) {
		t.Fatalf("gaps %v, want %v", ge.Gaps, want)
	}
	if got := err.Error(); got != "stream CLAIMSTREAM: "+msg {
		t.Fatalf("error %q, want it to say %q", got, msg)
	}
}

func TestReadEndsOnATruncatedBlockAndNamesTheLostSequence(t *testing.T) {
	srv := eventstest.StartServer(t)
	writeSlots(t, srv.Store(), 30)
	srv.Stop()
	// Records are several hundred bytes: cutting 100 bytes damages the
	// last one (seq 30) only, as a crash in the middle of its write would.
	srv.TruncateBlock("CLAIMSTREAM", 100)
	srv.Start()
	st := srv.Store()

	seqs, err := readBounded(t, st, 1, 0)
	wantGaps(t, err, eventlog.Gaps{{30, 30}}, "sequence 30 is missing from the log")
	if !slices.Equal(seqs, seqRange(1, 29)) {
		t.Fatalf("read %v, want every intact event 1..29", seqs)
	}
	// A range that is nothing but the lost sequence ends too.
	seqs, err = readBounded(t, st, 30, 30)
	wantGaps(t, err, eventlog.Gaps{{30, 30}}, "sequence 30 is missing from the log")
	if len(seqs) != 0 {
		t.Fatalf("read %v from a lost sequence", seqs)
	}
}

func TestReadReportsADamagedRecordInTheMiddle(t *testing.T) {
	srv := eventstest.StartServer(t)
	writeSlots(t, srv.Store(), 30)
	srv.Stop()
	// 40 flipped bytes inside the record of seq 16 (slot s15).
	srv.FlipBlockBytes("CLAIMSTREAM", []byte("cs.slot.s15.ClaimCreated"), 40)
	srv.Start()
	st := srv.Store()

	seqs, err := readBounded(t, st, 1, 0)
	wantGaps(t, err, eventlog.Gaps{{16, 16}}, "sequence 16 is missing from the log")
	if !slices.Equal(seqs, seqRange(1, 30, 16)) {
		t.Fatalf("read %v, want 1..30 without 16", seqs)
	}
	// A read that ends right after the damage, and one that starts on it.
	if _, err := readBounded(t, st, 10, 16); eventlog.GapsOf(err) == nil {
		t.Fatalf("read 10..16: want the gap at 16, got %v", err)
	}
	seqs, err = readBounded(t, st, 16, 20)
	wantGaps(t, err, eventlog.Gaps{{16, 16}}, "sequence 16 is missing from the log")
	if !slices.Equal(seqs, seqRange(17, 20)) {
		t.Fatalf("read %v, want 17..20", seqs)
	}
}

func TestReadOfSequencesThatCannotBeDeliveredEnds(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	writeSlots(t, st, 5)
	// The log ends at 5: 6..9 will never be delivered.
	seqs, err := readBounded(t, st, 3, 9)
	wantGaps(t, err, eventlog.Gaps{{6, 9}}, "sequences 6-9 are missing from the log")
	if !slices.Equal(seqs, seqRange(3, 5)) {
		t.Fatalf("read %v, want 3..5", seqs)
	}
	seqs, err = readBounded(t, st, 7, 8)
	wantGaps(t, err, eventlog.Gaps{{7, 8}}, "sequences 7-8 are missing from the log")
	if len(seqs) != 0 {
		t.Fatalf("read %v past the end of the log", seqs)
	}
	// A whole log reads with no error.
	if seqs, err := readBounded(t, st, 1, 0); err != nil || !slices.Equal(seqs, seqRange(1, 5)) {
		t.Fatalf("healthy read: %v, %v", seqs, err)
	}
}

func TestGapsAddMergesAndReportsWhatIsNew(t *testing.T) {
	var gs eventlog.Gaps
	if fresh := gs.Add(88, 90); !slices.Equal(fresh, eventlog.Gaps{{88, 90}}) {
		t.Fatalf("fresh %v", fresh)
	}
	if fresh := gs.Add(16, 16); !slices.Equal(fresh, eventlog.Gaps{{16, 16}}) {
		t.Fatalf("fresh %v", fresh)
	}
	if fresh := gs.Add(85, 95); !slices.Equal(fresh, eventlog.Gaps{{85, 87}, {91, 95}}) {
		t.Fatalf("fresh %v", fresh)
	}
	if fresh := gs.Add(89, 89); len(fresh) != 0 {
		t.Fatalf("a known gap reported as new: %v", fresh)
	}
	if fresh := gs.Add(17, 84); !slices.Equal(fresh, eventlog.Gaps{{17, 84}}) {
		t.Fatalf("fresh %v", fresh)
	}
	if !slices.Equal(gs, eventlog.Gaps{{16, 95}}) || gs.Count() != 80 {
		t.Fatalf("merged %v (%d)", gs, gs.Count())
	}
	if got := (eventlog.Gaps{{16, 16}, {88, 90}}).String(); got != "sequences 16, 88-90 are missing from the log" {
		t.Fatalf("%q", got)
	}
}

// Gaps.Add agrees with a plain set of sequences, in any order of adds.
func TestGapsAddIsASetOfSequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var gs eventlog.Gaps
		set := map[uint64]bool{}
		for range rng.IntN(8) + 1 {
			first := uint64(rng.IntN(60) + 1)
			last := first + uint64(rng.IntN(10))
			var want []uint64
			for s := first; s <= last; s++ {
				if !set[s] {
					want = append(want, s)
				}
				set[s] = true
			}
			var got []uint64
			for _, g := range gs.Add(first, last) {
				got = append(got, seqRange(g.First, g.Last)...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("add %d-%d to %v: fresh %v, want %v", first, last, gs, got, want)
			}
		}
		var all []uint64
		for i, g := range gs {
			if i > 0 && g.First <= gs[i-1].Last+1 {
				t.Fatalf("gaps %v not disjoint and apart", gs)
			}
			all = append(all, seqRange(g.First, g.Last)...)
		}
		if len(all) != len(set) || uint64(len(set)) != gs.Count() {
			t.Fatalf("gaps %v hold %d sequences, the set %d", gs, len(all), len(set))
		}
	}
}
