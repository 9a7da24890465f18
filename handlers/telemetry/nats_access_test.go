package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/handlers/telemetry"
)

// The client port's refused logins, the subscribers' consumers and their
// push consumers removed are on the scrape as read at scrape time.
func TestNATSAccessOnTheScrapeEndpoint(t *testing.T) {
	tel := setup(t, telemetry.Options{Prometheus: true})
	removed := uint64(0)
	if err := tel.Metrics.ObserveNATSAccess(telemetry.NATSAccess{
		AuthFailures:               func() uint64 { return 3 },
		SubscriberConsumers:        func(context.Context) (int, int, bool) { return 7, 100, true },
		SubscriberConsumersRemoved: func() uint64 { return removed },
	}); err != nil {
		t.Fatal(err)
	}
	removed = 2
	got := scrape(t, tel)
	for _, want := range []string{
		`claimstream_nats_auth_failures_total 3`,
		`claimstream_nats_subscriber_consumers 7`,
		`claimstream_nats_subscriber_consumer_limit 100`,
		`claimstream_nats_subscriber_consumers_removed_total 2`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the scrape has no %q:\n%s", want, grepLines(got, "claimstream_nats"))
		}
	}
}
