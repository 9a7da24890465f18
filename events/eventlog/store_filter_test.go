package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
)

// TestReadAggregateReadsOnlyItsSlot interleaves events of slots whose names
// share prefixes and contain dots (a dot is a NATS token separator, encoded
// %2E), over more than one direct-get batch, and reads each slot back.
func TestReadAggregateReadsOnlyItsSlot(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	slots := []string{"node-1.lan", "node-1", "node-1.lan.x", "node-10.lan"}
	want := map[string][]uint64{}
	last := map[string]uint64{}
	// 1,300 events: node-1.lan gets more than two batches' worth.
	for i := range 1300 {
		slot := slots[0]
		if i%3 != 0 {
			slot = slots[1+i%len(slots[1:])]
		}
		ev := eventstest.Created(slot, fmt.Sprintf("%s-%06x", slot, i))
		res, err := st.Append(ctx, events.SlotAggregate(slot), last[slot], ev)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		last[slot] = res.Last
		want[slot] = append(want[slot], res.Last)
	}
	for _, slot := range append(slots, "node-2.lan") {
		var got []uint64
		err := st.ReadAggregate(ctx, events.SlotAggregate(slot), func(e events.Event) error {
			if e.Err != nil {
				t.Fatalf("seq %d: %v", e.Seq, e.Err)
			}
			if e.Aggregate != events.SlotAggregate(slot) || e.Data.Reference().Slot != slot {
				t.Fatalf("reading %s met seq %d of %s", slot, e.Seq, e.Aggregate)
			}
			got = append(got, e.Seq)
			return nil
		})
		if err != nil {
			t.Fatalf("read %s: %v", slot, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want[slot]) {
			t.Fatalf("%s: read %d events %v..., want %d", slot, len(got), head(got), len(want[slot]))
		}
	}
}

func TestReadFilteredByTypeAndFrom(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	var seqs []uint64
	for i, slot := range []string{"a.b", "c", "a.b.c"} {
		r1, err := st.Append(ctx, events.SlotAggregate(slot), 0, eventstest.Created(slot, fmt.Sprintf("c%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, events.SlotAggregate(slot), r1.Last, eventstest.Booting(slot, fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, r1.Last)
	}
	filter := st.Subjects().TypeFilter(events.KindSlot, events.TypeClaimCreated)
	var got []uint64
	read := func(from uint64) {
		got = nil
		if err := st.ReadFiltered(ctx, filter, from, func(e events.Event) error {
			got = append(got, e.Seq)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	read(0)
	if fmt.Sprint(got) != fmt.Sprint(seqs) {
		t.Fatalf("ClaimCreated at %v, want %v", got, seqs)
	}
	read(seqs[1])
	if fmt.Sprint(got) != fmt.Sprint(seqs[1:]) {
		t.Fatalf("from %d: %v, want %v", seqs[1], got, seqs[1:])
	}
	read(seqs[2] + 1)
	if len(got) != 0 {
		t.Fatalf("past the last: %v", got)
	}
	// fn's error stops the read and comes back.
	stop := errors.New("stop")
	n := 0
	err := st.ReadAggregate(ctx, events.SlotAggregate("a.b"), func(events.Event) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("stop: err %v after %d calls", err, n)
	}
}

func head(s []uint64) []uint64 {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}
