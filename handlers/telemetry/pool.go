package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// Instruments of the pool file.
const (
	// claimstream_pool_file_applied: 1 when the last apply of the pool file
	// finished (the log matches the file), 0 when it was refused or stopped
	// part-way (the log holds part of it; the error is logged).
	InstPoolApplied = "claimstream_pool_file_applied"
	// claimstream_pool_file_apply_failures_total: applies of the pool file
	// that were refused or stopped part-way, or files that did not load.
	InstPoolApplyFailures = "claimstream_pool_file_apply_failures"
)

type poolInstruments struct {
	applied  metric.Int64Gauge
	failures metric.Int64Counter
}

func newPoolInstruments(meter metric.Meter) (poolInstruments, error) {
	var p poolInstruments
	var err1, err2 error
	p.applied, err1 = meter.Int64Gauge(InstPoolApplied,
		metric.WithDescription("1 when the last pool file apply finished, 0 when it was refused or stopped part-way."))
	p.failures, err2 = meter.Int64Counter(InstPoolApplyFailures,
		metric.WithDescription("Pool file applies refused or stopped part-way, and pool files that did not load."))
	return p, errors.Join(err1, err2)
}

// PoolApplied records the outcome of one apply of the pool file (err nil:
// the log matches the file).
func (m *Metrics) PoolApplied(err error) {
	ctx := context.Background()
	if err != nil {
		m.pool.applied.Record(ctx, 0)
		m.pool.failures.Add(ctx, 1)
		return
	}
	m.pool.applied.Record(ctx, 1)
}
