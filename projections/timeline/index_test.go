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
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// TestTimelineIndexEqualsTheFoldOfEveryWindow: the in-memory index cuts the
// same intervals out of the log as folding the window from the replayed
// views does, for windows starting and ending all over the history.
func TestTimelineIndexEqualsTheFoldOfEveryWindow(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	idx := timeline.NewIndex(f.H.Store, f.H.Views.Checkpoints(), nil)
	compared := sameTimelines(t, f, idx, 7*time.Minute)
	t.Logf("compared %d windows", compared)
	// A new event reaches the index at the next request.
	f.H.MustExec(decide.ManualClaim{Slot: "node-1.lan", By: "carol"})
	f.Step(131 * time.Minute)
	now := f.H.Clock.Now().UTC()
	got, err := idx.Timeline(ctx, handlerstest.Start, now, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resttest.Canonical(got), "bar node-1.lan 7800000-7860000 pending") {
		t.Fatalf("the new claim is not on the index's timeline:\n%s", resttest.Canonical(got))
	}
}

// sameTimelines checks that idx cuts every window of the scripted history
// (and what came after), with bounds step apart, exactly as folding the
// window from the log does, and returns how many windows it compared.
func sameTimelines(t *testing.T, f *resttest.Fixture, idx *timeline.Index, step time.Duration) int {
	t.Helper()
	ctx := context.Background()
	end := f.H.Clock.Now().UTC()
	var marks []time.Time
	for at := handlerstest.Start.Add(-time.Minute); !at.After(end); at = at.Add(step) {
		marks = append(marks, at)
	}
	marks = append(marks, handlerstest.Start.Add(19*time.Minute), end)
	sort.Slice(marks, func(i, j int) bool { return marks[i].Before(marks[j]) })
	compared := 0
	for i, since := range marks {
		for _, until := range marks[i+1:] {
			want, err := timeline.Build(ctx, f.H.Store, f.H.Views.Checkpoints(), since, until, end)
			if err != nil {
				t.Fatal(err)
			}
			got, err := idx.Timeline(ctx, since, until, end)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := resttest.Canonical(got), resttest.Canonical(want); g != w {
				t.Fatalf("window %s..%s:\nindex\n%s\nfold\n%s", since.Format("15:04"), until.Format("15:04"), g, w)
			}
			compared++
		}
	}
	return compared
}
