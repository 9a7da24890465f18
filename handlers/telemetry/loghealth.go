package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/events"
)

const (
	// claimstream_log_writable: 1 while the event log can be written, 0
	// while appends are refused (disk full, JetStream down).
	InstLogWritable = "claimstream_log_writable"
	// claimstream_log_write_failures_total{reason}: failed appends, by
	// reason (events.WriteFailure*).
	InstLogWriteFailures = "claimstream_log_write_failures"
)

// ObserveLogHealth exports the log's writability and its failed appends.
func (m *Metrics) ObserveLogHealth(h *events.LogHealth) error {
	writable, err := m.meter.Int64ObservableGauge(InstLogWritable, metric.WithDescription("1 while the event log can be written, 0 while appends are refused."))
	if err != nil {
		return err
	}
	failures, err := m.meter.Int64ObservableCounter(InstLogWriteFailures, metric.WithDescription("Failed appends to the event log, by reason."))
	if err != nil {
		return err
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		v := int64(0)
		if h.Status().Writable {
			v = 1
		}
		o.ObserveInt64(writable, v)
		for reason, n := range h.WriteFailures() {
			o.ObserveInt64(failures, int64(n), metric.WithAttributes(attribute.String("reason", reason)))
		}
		return nil
	}, writable, failures)
	return err
}
