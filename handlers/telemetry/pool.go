package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instruments of the pool file.
const (
	// claimstream_pool_file_applied: 1 when the last apply of the pool file
	// finished (the log matches the file), 0 when it was refused or stopped
	// part-way (the log holds part of it; the error is logged).
	InstPoolApplied = "claimstream_pool_file_applied"
	// claimstream_pool_file_apply_failures_total{reason}: applies of the
	// pool file that were refused or stopped part-way, or files that did
	// not load.
	InstPoolApplyFailures = "claimstream_pool_file_apply_failures"
)

// Reasons of claimstream_pool_file_apply_failures_total.
const (
	// PoolFileInvalid: the file does not parse or validate.
	PoolFileInvalid = "invalid"
	// PoolFileRefused: the log refuses the file.
	PoolFileRefused = "refused"
	// PoolFileStopped: the apply stopped part-way, not for the file's sake
	// (the log not writable, the leadership lost); it is applied again.
	PoolFileStopped = "stopped"
)

// PoolFileReasons are the values of the reason label, each on the scrape
// at 0 from the start.
var PoolFileReasons = []string{PoolFileInvalid, PoolFileRefused, PoolFileStopped}

type poolInstruments struct {
	applied  metric.Int64Gauge
	failures metric.Int64Counter
}

func newPoolInstruments(meter metric.Meter) (poolInstruments, error) {
	var p poolInstruments
	var err1, err2 error
	p.applied, err1 = meter.Int64Gauge(InstPoolApplied,
		metric.WithDescription("1 when the last pool file apply finished, 0 when it was refused or stopped part-way."))
	p.failures, err2 = meter.Int64Counter(InstPoolApplyFailures, metric.WithDescription(descPoolFailures))
	return p, errors.Join(err1, err2)
}

// PoolApplied records the outcome of one read or apply of the pool file
// (err nil: the log matches the file; else reason, one of
// PoolFileReasons, says why not).
func (m *Metrics) PoolApplied(reason string, err error) {
	ctx := context.Background()
	if err != nil {
		m.pool.applied.Record(ctx, 0)
		m.pool.failures.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
		return
	}
	m.pool.applied.Record(ctx, 1)
}
