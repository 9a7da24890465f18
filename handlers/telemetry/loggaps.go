package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Instruments of the log's health, read from the views at each scrape.
const (
	// claimstream_log_missing_events: sequences missing from the log
	// (a damaged or truncated block file) that the views were built
	// without. Anything above 0 needs an operator.
	InstLogMissing = "claimstream_log_missing_events"
	// claimstream_events_refused_total: events the model refused to fold
	// (each logged "event refused by the model"); a run of them usually
	// follows a gap in the log.
	InstEventsRefused = "claimstream_events_refused"
	// claimstream_views_direct_read_events_total: events the views read
	// from the stream by direct gets because their reader had not
	// delivered them in time (its consumer lost with a server).
	InstViewsDirectRead = "claimstream_views_direct_read_events"
)

// registerLogHealth creates the log-health instruments and their callback.
func (m *Metrics) registerLogHealth() error {
	missing, err := m.meter.Int64ObservableGauge(InstLogMissing,
		metric.WithDescription("Sequences missing from the event log that the views were built without."))
	if err != nil {
		return fmt.Errorf("instrument %s: %w", InstLogMissing, err)
	}
	refused, err := m.meter.Int64ObservableCounter(InstEventsRefused,
		metric.WithDescription("Events the model refused to fold since start."))
	if err != nil {
		return fmt.Errorf("instrument %s: %w", InstEventsRefused, err)
	}
	direct, err := m.meter.Int64ObservableCounter(InstViewsDirectRead,
		metric.WithDescription("Events the views read from the stream directly because their reader had not delivered them in time."))
	if err != nil {
		return fmt.Errorf("instrument %s: %w", InstViewsDirectRead, err)
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		v := m.views.Load()
		if v == nil {
			return nil
		}
		o.ObserveInt64(missing, int64(v.Gaps().Count()))
		o.ObserveInt64(refused, int64(v.Refused()))
		o.ObserveInt64(direct, int64(v.DirectRead()))
		return nil
	}, missing, refused, direct)
	if err != nil {
		return fmt.Errorf("log health metrics: %w", err)
	}
	return nil
}
