package telemetry_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/claimstream/claimstream/handlers/telemetry"
)

// The scrape shows the epoch this replica leads, 0 once it follows.
func TestScrapeShowsTheLeadershipEpoch(t *testing.T) {
	tel := setup(t, telemetry.Options{Prometheus: true})
	var epoch atomic.Uint64
	epoch.Store(4)
	if err := tel.Metrics.ObserveLeadership(epoch.Load); err != nil {
		t.Fatal(err)
	}
	if body := scrape(t, tel); !strings.Contains(body, "claimstream_leader_epoch 4") {
		t.Fatalf("leading replica's scrape:\n%s", body)
	}
	epoch.Store(0)
	if body := scrape(t, tel); !strings.Contains(body, "claimstream_leader_epoch 0") {
		t.Fatalf("follower's scrape:\n%s", body)
	}
}
