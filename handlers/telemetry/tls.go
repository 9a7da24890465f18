package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// InstTLSReloadFailures is claimstream_tls_certificate_reload_failures_total
// {server=provider|api}: certificate rotations that did not load (garbage,
// a half-written or deleted file); the previous certificate stays in
// service. Any increase means a renewal is not being served.
const InstTLSReloadFailures = "claimstream_tls_certificate_reload_failures"

func (m *Metrics) newTLSInstruments(meter metric.Meter) error {
	var err error
	m.tlsReloadFailures, err = meter.Int64Counter(InstTLSReloadFailures,
		metric.WithDescription("TLS certificate rotations that did not load; the previous certificate stays in service."))
	return err
}

// TLSReloadFailed counts a certificate rotation of server that did not
// load (provider.TLSConfig.OnReloadFailure).
func (m *Metrics) TLSReloadFailed(server string) {
	m.tlsReloadFailures.Add(context.Background(), 1, metric.WithAttributes(attribute.String("server", server)))
}
