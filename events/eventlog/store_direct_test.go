package eventlog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
)

// ReadDirect delivers the range it is asked for, across batches, and
// says where it stopped: at the range's end, or at the log's.
func TestReadDirectReadsARangeAcrossBatches(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	var last uint64
	for i := range 1100 {
		res, err := st.Append(ctx, events.SlotAggregate("s"), last, eventstest.Created("s", fmt.Sprintf("c-%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		last = res.Last
	}
	for _, tc := range []struct{ from, to, next uint64 }{
		{1, 3, 4},
		{0, 1, 2},
		{500, 1100, 1101},
		{1090, 2000, 1101}, // past the log's end: what there is
		{1200, 1300, 1200}, // nothing there yet
	} {
		var got []uint64
		next, err := st.ReadDirect(ctx, tc.from, tc.to, func(e events.Event) error {
			if e.Err != nil {
				t.Fatalf("seq %d: %v", e.Seq, e.Err)
			}
			got = append(got, e.Seq)
			return nil
		})
		if err != nil {
			t.Fatalf("ReadDirect(%d, %d): %v", tc.from, tc.to, err)
		}
		first := max(tc.from, 1)
		var want []uint64
		for s := first; s < tc.next; s++ {
			want = append(want, s)
		}
		if next != tc.next || !slices.Equal(got, want) {
			t.Fatalf("ReadDirect(%d, %d) = %d events %v.., next %d; want %d events, next %d", tc.from, tc.to, len(got), got[:min(len(got), 3)], next, len(want), tc.next)
		}
	}
}
