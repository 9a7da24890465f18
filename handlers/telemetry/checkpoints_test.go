package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
)

// A checkpoint bucket that went away: the save fails, the scrape counts
// it, readiness names it; once the bucket is back the next checkpoint lands
// and the problem clears.
func TestScrapeShowsCheckpointFailures(t *testing.T) {
	_, st, _ := logWithGroup(t, "g")
	ctx := context.Background()
	js := st.JetStream()
	cps, err := projections.OpenCheckpoints(ctx, js, "cp-fault", 1)
	if err != nil {
		t.Fatal(err)
	}
	tel := setup(t, telemetry.Options{Prometheus: true})
	views := projections.NewRunner(st, projections.RunnerOptions{Checkpoints: cps, Logger: quiet})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tel.Metrics.ObserveViews(views)
	if err := js.DeleteObjectStore(ctx, "cp-fault"); err != nil {
		t.Fatal(err)
	}
	if _, err := views.CheckpointNow(ctx); err == nil {
		t.Fatal("checkpoint into a deleted bucket succeeded")
	}
	body := scrape(t, tel)
	for _, line := range []string{`claimstream_checkpoint_failures_total 1`, `claimstream_checkpoint_seq 0`} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if problem, blocking := views.Problem(); blocking || !strings.Contains(problem, "checkpoints failing since") {
		t.Errorf("readiness problem %q (blocking %t), want checkpoints failing, not blocking", problem, blocking)
	}
	if _, err := projections.OpenCheckpoints(ctx, js, "cp-fault", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := views.CheckpointNow(ctx); err != nil {
		t.Fatalf("checkpoint once the bucket is back: %v", err)
	}
	if !strings.Contains(scrape(t, tel), "claimstream_checkpoint_seq 1\n") {
		t.Error("scrape does not show the checkpoint at seq 1")
	}
	if problem, _ := views.Problem(); problem != "" {
		t.Errorf("problem %q after a checkpoint landed", problem)
	}
}
