package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/telemetry"
)

// A message without the writer's envelope in the log shows on the scrape
// endpoint as a skipped bad entry.
func TestSkippedLogEntriesOnTheScrapeEndpoint(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	tel := setup(t, telemetry.Options{Prometheus: true})
	if err := tel.Metrics.ObserveStore(st); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := st.JetStream().Publish(ctx, "cs.slot.a.SlotDecommissioned", []byte(`{"slot":"a","group":"g"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, 1); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, tel)
	for _, line := range []string{
		`claimstream_log_entries_skipped_total{reason="bad_entry"} 1`,
		`claimstream_log_entries_skipped_total{reason="unknown_type"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
}
