package projections_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/projections"
)

// A save of an index's copy is counted, saved or failed; a failed one
// (here: the bucket gone, as with a disk that refuses writes) is logged
// once in words and loses nothing but the copy.
func TestIndexCopySavesAreCountedSavedOrFailed(t *testing.T) {
	ctx := context.Background()
	st := eventstest.StartServer(t).Store()
	cps, err := projections.OpenCheckpoints(ctx, st.JetStream(), "COST_COPIES_TEST", 1)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	logs, log := logcapture.New(slog.LevelInfo)
	c := projections.NewIndexCopies("cost index", "cost-", "Claimstream-Cost-Event-Id", cps, projections.CopyOptions{OnSave: func(o string) { outcomes = append(outcomes, o) }}, log)

	if !c.Save(ctx, 7, "", []byte("copy")) {
		t.Fatal("the first save failed")
	}
	if err := st.JetStream().DeleteObjectStore(ctx, "COST_COPIES_TEST"); err != nil {
		t.Fatal(err)
	}
	if c.Save(ctx, 9, "", []byte("copy")) {
		t.Fatal("a save into a deleted bucket reported saved")
	}
	if got := strings.Join(outcomes, " "); got != "saved failed" {
		t.Fatalf("outcomes %q, want saved then failed", got)
	}
	if n := logs.Count("cannot save a copy of the cost index; the next start folds more of the log"); n != 1 {
		t.Fatalf("%d warnings for the failed save:\n%s", n, logs.String())
	}
}
