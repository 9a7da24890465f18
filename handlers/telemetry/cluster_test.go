package telemetry_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/telemetry"
)

// The scrape shows the replicas reached and the quorum of a real cluster,
// and their fall when two of three stop.
func TestScrapeShowsClusterPeersAndQuorum(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	tel := setup(t, telemetry.Options{Prometheus: true})
	if err := tel.Metrics.ObserveCluster(c.Servers[0].ClusterStatus); err != nil {
		t.Fatal(err)
	}
	// The meta leader can be known before every route is up: wait for all.
	waitForScrape(t, tel, "claimstream_jetstream_cluster_peers_current 3", "claimstream_jetstream_quorum 1")
	c.Stop(1)
	c.Stop(2)
	waitForScrape(t, tel, "claimstream_jetstream_cluster_peers_current 1", "claimstream_jetstream_quorum 0")
}

// waitForScrape polls (up to 30s) until the scrape holds every line.
func waitForScrape(t *testing.T, tel *telemetry.Telemetry, lines ...string) {
	t.Helper()
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		body := scrape(t, tel)
		for _, line := range lines {
			if !strings.Contains(body, line+"\n") {
				return fmt.Errorf("scrape lacks %q", line)
			}
		}
		return nil
	})
}
