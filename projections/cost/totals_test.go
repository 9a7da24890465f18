package cost

import (
	"cmp"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/claimstream/claimstream/events"
)

// sortedTotals orders totals by slot and currency, for comparing.
func sortedTotals(ts []SlotTotal) []SlotTotal {
	return slices.SortedFunc(slices.Values(ts), func(a, b SlotTotal) int {
		return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.Currency, b.Currency))
	})
}

// sameTotals fails unless the index's slot totals at end are the window-less
// fold by slot's over the same events, to the last bit.
func sameTotals(t interface {
	Helper()
	Fatalf(string, ...any)
}, what string, evs []events.Event, x *Index, end time.Time) {
	t.Helper()
	f := NewFold(BySlot, time.Time{}, time.Time{})
	for _, e := range evs {
		f.Apply(e)
	}
	want, got := sortedTotals(f.SlotTotals(end)), sortedTotals(x.SlotTotals(end))
	if !slices.Equal(got, want) {
		t.Fatalf("%s: index slot totals at %s\n got %+v\nwant %+v", what, end, got, want)
	}
}

// The index's running totals are the fold's, exactly: over random
// histories with pool changes, after a part of the log and after all of
// it, until instants before, inside and after the log.
func TestPropertyIndexSlotTotalsEqualFold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t)
		h.evs = withPoolChanges(t, h.evs)
		start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		end := start.Add(time.Duration(rapid.IntRange(-3600, 40*3600).Draw(t, "end")) * time.Second)
		cut := rapid.IntRange(0, len(h.evs)).Draw(t, "cut")
		x := indexOf(h.evs[:cut])
		sameTotals(t, "first part", h.evs[:cut], x, end)
		for _, e := range h.evs[cut:] {
			x.Apply(e)
		}
		for _, at := range []time.Time{end, propUntil, start.AddDate(0, 0, 400)} {
			sameTotals(t, "whole", h.evs, x, at)
		}
	})
}

// The transcripts' logs: totals until their last event and a year on.
func TestIndexSlotTotalsEqualFoldOnTranscripts(t *testing.T) {
	files := transcriptFiles(t)
	for _, file := range files {
		evs, _ := readTranscript(t, file)
		x := indexOf(evs)
		last := evs[len(evs)-1].Time
		for _, end := range []time.Time{last, last.AddDate(1, 0, 0)} {
			sameTotals(t, filepath.Base(file), evs, x, end)
		}
		if len(x.SlotTotals(last.AddDate(1, 0, 0))) == 0 {
			t.Errorf("%s: no slot totals", file)
		}
	}
}
