package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// claimstream_leader_epoch: the leadership epoch this replica leads, 0 on
// a follower. Exactly one replica of a healthy set reports above 0; the
// views' lag behind the log is claimstream_projection_lag_events.
const InstLeaderEpoch = "claimstream_leader_epoch"

// ObserveLeadership reports epoch() (handlers.Leadership.Epoch, 0 while
// this replica does not lead) at each scrape.
func (m *Metrics) ObserveLeadership(epoch func() uint64) error {
	g, err := m.meter.Int64ObservableGauge(InstLeaderEpoch,
		metric.WithDescription("Leadership epoch this replica leads (0: a follower)."))
	if err != nil {
		return fmt.Errorf("instrument %s: %w", InstLeaderEpoch, err)
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, int64(epoch()))
		return nil
	}, g)
	if err != nil {
		return fmt.Errorf("leadership metrics: %w", err)
	}
	return nil
}
