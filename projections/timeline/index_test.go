package timeline_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections/timeline"
	"github.com/claimstream/claimstream/projections/timeline/timelinetest"
)

// TestTimelineIndexEqualsTheFoldOfEveryWindow: the in-memory index cuts the
// same intervals out of the log as folding the window from the replayed
// views does, for windows starting and ending all over the history.
func TestTimelineIndexEqualsTheFoldOfEveryWindow(t *testing.T) {
	h := handlerstest.New(t)
	h.History(nil)
	ctx := context.Background()
	idx, err := timeline.NewIndex(ctx, h.Views, h.Store, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	compared := sameTimelines(t, h, idx, 7*time.Minute)
	t.Logf("compared %d windows", compared)
	// A new event reaches the index at the next request.
	h.MustExec(decide.ManualClaim{Slot: "node-1.lan", By: "carol"})
	h.StepTo(131 * time.Minute)
	now := h.Clock.Now().UTC()
	got, err := idx.Timeline(ctx, handlerstest.Start, now, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(timelinetest.Canonical(got), "bar node-1.lan 7800000-7860000 pending") {
		t.Fatalf("the new claim is not on the index's timeline:\n%s", timelinetest.Canonical(got))
	}
}

// sameTimelines checks that idx cuts every window of the scripted history
// (and what came after), with bounds step apart, exactly as folding the
// window from the log does, and returns how many windows it compared.
func sameTimelines(t *testing.T, h *handlerstest.Harness, idx *timeline.Index, step time.Duration) int {
	t.Helper()
	ctx := context.Background()
	end := h.Clock.Now().UTC()
	var marks []time.Time
	for at := handlerstest.Start.Add(-time.Minute); !at.After(end); at = at.Add(step) {
		marks = append(marks, at)
	}
	marks = append(marks, handlerstest.Start.Add(19*time.Minute), end)
	sort.Slice(marks, func(i, j int) bool { return marks[i].Before(marks[j]) })
	compared := 0
	for i, since := range marks {
		for _, until := range marks[i+1:] {
			want, err := timeline.Build(ctx, h.Store, h.Views.Checkpoints(), since, until, end)
			if err != nil {
				t.Fatal(err)
			}
			got, err := idx.Timeline(ctx, since, until, end)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := timelinetest.Canonical(got), timelinetest.Canonical(want); g != w {
				t.Fatalf("window %s..%s:\nindex\n%s\nfold\n%s", since.Format("15:04"), until.Format("15:04"), g, w)
			}
			compared++
		}
	}
	return compared
}
