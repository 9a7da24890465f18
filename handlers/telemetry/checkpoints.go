package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Instruments of the views' checkpoints, read from the views at each scrape.
const (
	// claimstream_checkpoint_seq: the sequence of the newest checkpoint
	// (0: none). Events before the log's first sequence are covered only
	// while this is at or past it.
	InstCheckpointSeq = "claimstream_checkpoint_seq"
	// claimstream_checkpoint_failures_total: checkpoints that could not be
	// saved (each logged "checkpoint failed").
	InstCheckpointFailures = "claimstream_checkpoint_failures"
)

// registerCheckpoints creates the checkpoint instruments and their callback.
func (m *Metrics) registerCheckpoints() error {
	seq, err := m.meter.Int64ObservableGauge(InstCheckpointSeq,
		metric.WithDescription("Sequence of the newest checkpoint of the views (0: none)."))
	if err != nil {
		return fmt.Errorf("instrument %s: %w", InstCheckpointSeq, err)
	}
	failures, err := m.meter.Int64ObservableCounter(InstCheckpointFailures,
		metric.WithDescription("Checkpoints of the views that could not be saved since start."))
	if err != nil {
		return fmt.Errorf("instrument %s: %w", InstCheckpointFailures, err)
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		v := m.views.Load()
		if v == nil {
			return nil
		}
		o.ObserveInt64(seq, int64(v.CheckpointSeq()))
		o.ObserveInt64(failures, int64(v.CheckpointFailures()))
		return nil
	}, seq, failures)
	if err != nil {
		return fmt.Errorf("checkpoint metrics: %w", err)
	}
	return nil
}
