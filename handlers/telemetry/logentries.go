package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/events/eventlog"
)

// InstSkippedEntries counts log entries the store's readers skipped:
// reason "unknown_type" (a newer writer's event) or "bad_entry" (no
// writer's envelope, bad data: a forged or hand-made message).
const InstSkippedEntries = "claimstream_log_entries_skipped"

// ObserveStore reports the store's skipped entries as a counter.
func (m *Metrics) ObserveStore(st *eventlog.Store) error {
	c, err := m.meter.Int64ObservableCounter(InstSkippedEntries,
		metric.WithDescription("Log entries the readers skipped and did not fold, by reason (unknown_type, bad_entry)."))
	if err != nil {
		return fmt.Errorf("metric %s: %w", InstSkippedEntries, err)
	}
	unknown := metric.WithAttributes(attribute.String("reason", "unknown_type"))
	bad := metric.WithAttributes(attribute.String("reason", "bad_entry"))
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := st.Stats()
		o.ObserveInt64(c, int64(s.UnknownType), unknown)
		o.ObserveInt64(c, int64(s.BadData), bad)
		return nil
	}, c)
	if err != nil {
		return fmt.Errorf("metric %s: %w", InstSkippedEntries, err)
	}
	return nil
}
