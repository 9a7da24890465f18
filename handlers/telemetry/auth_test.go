package telemetry_test

import (
	"strings"
	"testing"

	"github.com/claimstream/claimstream/handlers/telemetry"
)

// TestAuthFailuresOnTheScrapeEndpoint: every surface and outcome is on the
// scrape at 0 from the start, then counts.
func TestAuthFailuresOnTheScrapeEndpoint(t *testing.T) {
	tel := setup(t, telemetry.Options{Prometheus: true})
	got := scrape(t, tel)
	for _, want := range []string{
		`claimstream_auth_failures_total{outcome="refused",surface="api"} 0`,
		`claimstream_auth_failures_total{outcome="throttled",surface="api"} 0`,
		`claimstream_auth_failures_total{outcome="refused",surface="dashboard"} 0`,
		`claimstream_auth_failures_total{outcome="throttled",surface="dashboard"} 0`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the scrape at start has no %q:\n%s", want, grepLines(got, "claimstream_auth"))
		}
	}
	tel.Metrics.AuthFailure("api", "refused")
	tel.Metrics.AuthFailure("api", "refused")
	tel.Metrics.AuthFailure("dashboard", "throttled")
	got = scrape(t, tel)
	for _, want := range []string{
		`claimstream_auth_failures_total{outcome="refused",surface="api"} 2`,
		`claimstream_auth_failures_total{outcome="throttled",surface="api"} 0`,
		`claimstream_auth_failures_total{outcome="refused",surface="dashboard"} 0`,
		`claimstream_auth_failures_total{outcome="throttled",surface="dashboard"} 1`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the scrape has no %q:\n%s", want, grepLines(got, "claimstream_auth"))
		}
	}
}
