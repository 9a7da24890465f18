package telemetry_test

import (
	"strings"
	"testing"

	"github.com/claimstream/claimstream/handlers/telemetry"
)

// TestDashboardOnTheScrapeEndpoint: logins are counted by result, CSRF
// refusals on their own.
func TestDashboardOnTheScrapeEndpoint(t *testing.T) {
	tel := setup(t, telemetry.Options{Prometheus: true})
	tel.Metrics.DashboardLogin("ok")
	tel.Metrics.DashboardLogin("wrong_token")
	tel.Metrics.DashboardLogin("wrong_token")
	tel.Metrics.DashboardCSRFRefused()
	got := scrape(t, tel)
	for _, want := range []string{
		`claimstream_dashboard_logins_total{result="ok"} 1` + "\n",
		`claimstream_dashboard_logins_total{result="wrong_token"} 2` + "\n",
		"claimstream_dashboard_csrf_refusals_total 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the scrape has no %q:\n%s", want, grepLines(got, "claimstream_dashboard"))
		}
	}
}
