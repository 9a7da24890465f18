package natsserver

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/internal/logcapture"
)

// A spell of refused logins is logged as its first failure, then one
// summary per authFailureSummary while it goes on; a quiet window ends it.
func TestAuthFailuresSummaryPerWindow(t *testing.T) {
	logs, log := logcapture.New(slog.LevelInfo)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	f := &AuthFailures{log: log, clock: clk}
	for i := range 30 {
		f.observe("10.0.0."+string(rune('1'+i%3)), "subscriber", "Authentication Failure")
	}
	if got := logs.Count("NATS login refused on the client port"); got != 1 {
		t.Fatalf("%d first-failure lines, want 1", got)
	}
	start := clk.Now()
	clk.SetTime(start.Add(30 * time.Second))
	f.observe("10.0.0.8", "x", "Authentication Failure")
	clk.SetTime(start.Add(61 * time.Second))
	f.observe("10.0.0.9", "x", "Authentication Failure")
	sum := logs.Lines("NATS logins refused on the client port")
	if len(sum) != 1 || !contains(sum[0], "refused=30", "addresses=4") {
		t.Fatalf("summary lines %q, want one of 30 refusals from 4 addresses", sum)
	}
	// Quiet for a window: the spell ended; its last count is summed up and
	// the next failure gets a line of its own.
	clk.SetTime(start.Add(61*time.Second + 2*authFailureSummary))
	f.observe("10.0.0.7", "y", "Authentication Failure")
	if got := logs.Count("NATS login refused on the client port"); got != 2 {
		t.Fatalf("%d first-failure lines after a quiet window, want 2:\n%s", got, logs)
	}
	if got := len(logs.Lines("NATS logins refused on the client port")); got != 2 {
		t.Fatalf("%d summary lines, want 2:\n%s", got, logs)
	}
	if f.Total() != 33 {
		t.Fatalf("total %d, want 33", f.Total())
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
