package telemetry

import (
	"context"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// claimstream_auth_failures_total{surface=api|dashboard,outcome=refused|throttled}:
// failed authentications on the REST API (a missing or wrong bearer
// token) and the dashboard's login (a wrong token); refused is a token
// checked and found wrong, throttled a request turned away unchecked
// because its address had too many failures (provider/rest's
// AuthLimiter). A rise of throttled is someone guessing.
const InstAuthFailures = "claimstream_auth_failures"

const (
	scrapeAuthFailures = InstAuthFailures + "_total"
	descAuthFailures   = "Failed authentications on the API and the dashboard login, by surface and outcome (refused: wrong or missing token; throttled: turned away for too many failures from the address)."
)

// authFailureSeries are the label sets the scrape shows from the start.
var authFailureSeries = []map[string]string{
	{"surface": "api", "outcome": "refused"},
	{"surface": "api", "outcome": "throttled"},
	{"surface": "dashboard", "outcome": "refused"},
	{"surface": "dashboard", "outcome": "throttled"},
}

func (m *Metrics) newAuthInstruments(meter metric.Meter) error {
	var err error
	m.authFailures, err = meter.Int64Counter(InstAuthFailures, metric.WithDescription(descAuthFailures))
	return err
}

// AuthFailure counts one failed authentication by surface (api,
// dashboard) and outcome (refused, throttled): rest.AuthLimitOptions's
// OnFailure.
func (m *Metrics) AuthFailure(surface, outcome string) {
	m.authFailures.Add(context.Background(), 1, metric.WithAttributes(attribute.String("surface", surface), attribute.String("outcome", outcome)))
}

// authZeros is the counter's entry in the scrape's zeros (atzero.go).
func authZeros() zeroFamily {
	return zeroFamily{scrapeAuthFailures, descAuthFailures, dto.MetricType_COUNTER, nil, authFailureSeries}
}
