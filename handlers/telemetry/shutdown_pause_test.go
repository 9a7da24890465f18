package telemetry_test

import (
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/telemetry"
)

// TestUnclaimedShutdownPauseCountsAsALimit: the input law's pause on a
// machine nobody claims is counted like a scale-down's, so the alert on
// claimstream_shutdown_attempt_limits_total fires for it too.
func TestUnclaimedShutdownPauseCountsAsALimit(t *testing.T) {
	tel := setup(t, telemetry.Options{Prometheus: true})
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	tel.Metrics.OnEvent(events.Event{Seq: 7, Time: at, Type: events.TypeUnclaimedShutdownPaused, Data: events.UnclaimedShutdownPaused{
		Ref: events.Ref{Slot: "a", Group: "g", Cause: "input law"}, Attempts: 3, PausedUntil: at.Add(30 * time.Minute),
	}})
	if body := scrape(t, tel); !strings.Contains(body, `claimstream_shutdown_attempt_limits_total{group="g"} 1`+"\n") {
		t.Fatalf("scrape lacks the pause:\n%s", body)
	}
}
