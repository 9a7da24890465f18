package cost

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/claimstream/claimstream/events"
)

// foldReport is the reference: a fold of evs over [since, until) by dim.
func foldReport(evs []events.Event, dim Dimension, since, until, end time.Time) Report {
	f := NewFold(dim, since, until)
	for _, e := range evs {
		f.Apply(e)
	}
	return f.Report(end)
}

// sameReport fails unless the index's report is the fold's, exactly.
func sameReport(t interface {
	Helper()
	Fatalf(string, ...any)
}, what string, evs []events.Event, x *Index, dim Dimension, since, until, end time.Time) {
	t.Helper()
	want := foldReport(evs, dim, since, until, end)
	got, err := x.Report(dim, since, until, end)
	if err != nil {
		t.Fatalf("%s by %s: %v", what, dim, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s by %s [%s, %s): the index reports\n%v\nthe fold\n%v", what, dim, since.Format(time.RFC3339), until.Format(time.RFC3339),
			strings.Join(formatRows(got), "\n"), strings.Join(formatRows(want), "\n"))
	}
}

// The index's report of any window and dimension is the fold's over the
// same events, exactly: over random histories, for the property tests'
// window, one starting before the first event, one ending in the future,
// a random one, and an open one; and at every point the index was fed to
// (a live index reports the events so far).
func TestPropertyIndexEqualsFold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t)
		h.evs = withPoolChanges(t, h.evs)
		start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		a := start.Add(time.Duration(rapid.IntRange(-3600, 30*3600).Draw(t, "since")) * time.Second)
		b := a.Add(time.Duration(rapid.IntRange(1, 40*3600).Draw(t, "length")) * time.Second)
		windows := [][2]time.Time{
			{propSince, propUntil},
			{start.Add(-24 * time.Hour), propUntil},
			{propSince, time.Now().AddDate(1, 0, 0)},
			{start.AddDate(-1, 0, 0), start.AddDate(0, 0, 400)},
			{a, b},
			{propSince, {}},
		}
		// Fed in two parts: the report after the first is the first
		// part's.
		cut := rapid.IntRange(0, len(h.evs)).Draw(t, "cut")
		x := indexOf(h.evs[:cut])
		dim := rapid.SampledFrom(Dimensions).Draw(t, "dim")
		end := propUntil.Add(time.Hour)
		sameReport(t, "first part", h.evs[:cut], x, dim, a, b, end)
		for _, e := range h.evs[cut:] {
			x.Apply(e)
		}
		for _, w := range windows {
			for _, dim := range Dimensions {
				sameReport(t, "whole", h.evs, x, dim, w[0], w[1], end)
			}
		}
	})
}

// withPoolChanges inserts into evs a few changes of the pool the random
// histories lack: a slot moved to the other group, a slot or a group
// retired (their machines stop counting) and declared again.
func withPoolChanges(t *rapid.T, evs []events.Event) []events.Event {
	groupOf := map[string]string{"a": "g1", "b": "g1", "c": "g2", "d": "g2"}
	for range rapid.IntRange(0, 4).Draw(t, "pool changes") {
		i := rapid.IntRange(0, len(evs)).Draw(t, "at")
		at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		if i > 0 {
			at = evs[i-1].Time
		}
		slot := rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "changed slot")
		group := rapid.SampledFrom([]string{"g1", "g2"}).Draw(t, "changed group")
		var d events.Data
		switch rapid.IntRange(0, 3).Draw(t, "change") {
		case 0:
			d = events.SlotChanged{Ref: events.Ref{Slot: slot, Group: group}}
		case 1:
			d = events.SlotRetired{Ref: events.Ref{Slot: slot, Group: groupOf[slot]}}
		case 2:
			d = events.GroupRetired{Ref: events.Ref{Group: group}}
		default:
			d = events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: groupOf[slot]}}
		}
		evs = slices.Insert(evs, i, events.Event{Time: at, Data: d})
	}
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
	}
	return evs
}

// The transcripts' logs: each of their reports, and windows before the
// first event and into the future, by every dimension.
func TestIndexEqualsFoldOnTranscripts(t *testing.T) {
	files := transcriptFiles(t)
	for _, file := range files {
		evs, reports := readTranscript(t, file)
		x := indexOf(evs)
		first, last := evs[0].Time, evs[len(evs)-1].Time
		windows := [][2]time.Time{
			{first.Add(-48 * time.Hour), last.Add(-time.Hour)},
			{first.Add(time.Hour), last.AddDate(1, 0, 0)},
			{first.AddDate(-1, 0, 0), last.AddDate(1, 0, 0)},
		}
		for _, r := range reports {
			windows = append(windows, [2]time.Time{r.since, r.until})
			// The transcript's own expectation holds for the index too.
			got := formatRows(mustReport(t, x, r.by, r.since, r.until, time.Time{}))
			if strings.Join(got, "\n") != strings.Join(r.want, "\n") {
				t.Errorf("%s:%d: index report by %s\n--- got\n%s\n--- want\n%s", file, r.line, r.by, strings.Join(got, "\n"), strings.Join(r.want, "\n"))
			}
		}
		for _, w := range windows {
			for _, dim := range Dimensions {
				sameReport(t, filepath.Base(file), evs, x, dim, w[0], w[1], time.Time{})
			}
		}
	}
}

// An empty index reports no rows, as an empty fold does.
func TestIndexEmpty(t *testing.T) {
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	sameReport(t, "empty", nil, NewIndex(), ByGroup, since, since.Add(time.Hour), time.Time{})
}
