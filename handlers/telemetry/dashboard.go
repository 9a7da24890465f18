package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instruments of the web dashboard (provider/rest/dashboard).
const (
	// claimstream_dashboard_logins_total{result=ok|wrong_token|cross_site}:
	// logins, and why one was refused (alert on a burst of wrong tokens).
	InstDashboardLogins = "claimstream_dashboard_logins"
	// claimstream_dashboard_csrf_refusals_total: writes that came with a
	// session cookie but without its CSRF token (a forged request, or a
	// page left open across a restart).
	InstDashboardCSRFRefusals = "claimstream_dashboard_csrf_refusals"
)

type dashboardInstruments struct {
	logins, csrf metric.Int64Counter
}

func (m *Metrics) newDashboardInstruments(meter metric.Meter) error {
	var err1, err2 error
	m.dashboard.logins, err1 = meter.Int64Counter(InstDashboardLogins, metric.WithDescription("Dashboard logins, by result."))
	m.dashboard.csrf, err2 = meter.Int64Counter(InstDashboardCSRFRefusals, metric.WithDescription("Dashboard writes refused for a missing or wrong CSRF token."))
	if err1 != nil {
		return err1
	}
	return err2
}

// DashboardLogin counts one login by its result (ok, wrong_token,
// cross_site).
func (m *Metrics) DashboardLogin(result string) {
	m.dashboard.logins.Add(context.Background(), 1, metric.WithAttributes(attribute.String("result", result)))
}

// DashboardCSRFRefused counts one write refused for its CSRF token.
func (m *Metrics) DashboardCSRFRefused() {
	m.dashboard.csrf.Add(context.Background(), 1)
}
