package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/handlers"
)

// The reactors' work queue (handlers/queue.go).
const (
	// claimstream_reactor_queue_depth: work items waiting for a worker.
	InstQueueDepth = "claimstream_reactor_queue_depth"
	// claimstream_reactor_work_duration_seconds{work=slot|scaler|strays,
	// outcome=ok|error}: one work item's reconcile.
	InstWorkDuration = "claimstream_reactor_work_duration"
	// claimstream_reaction_seconds: from an event's time to the end of the
	// reconcile it caused.
	InstReaction = "claimstream_reaction"
)

type queueInstruments struct {
	depth    metric.Int64ObservableGauge
	work     metric.Float64Histogram
	reaction metric.Float64Histogram
	depthOf  atomic.Pointer[func() int]
}

var _ handlers.QueueMetrics = (*Metrics)(nil)

var latencyBuckets = metric.WithExplicitBucketBoundaries(latencyBounds...)

func (m *Metrics) newQueueInstruments(meter metric.Meter) error {
	q := &m.queue
	var err error
	if q.work, err = meter.Float64Histogram(InstWorkDuration, metric.WithUnit("s"),
		metric.WithDescription("Time one reactor work item (a slot, the built-in scaler, the stray hosts) took."), latencyBuckets); err != nil {
		return err
	}
	if q.reaction, err = meter.Float64Histogram(InstReaction, metric.WithUnit("s"),
		metric.WithDescription("Time from an event to the end of the reconcile it caused."), latencyBuckets); err != nil {
		return err
	}
	if q.depth, err = meter.Int64ObservableGauge(InstQueueDepth,
		metric.WithDescription("Reactor work items waiting for a worker.")); err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if f := q.depthOf.Load(); f != nil {
			o.ObserveInt64(q.depth, int64((*f)()))
		}
		return nil
	}, q.depth)
	return err
}

// WorkDone records one work item of the reactors.
func (m *Metrics) WorkDone(work string, took time.Duration, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	m.queue.work.Record(context.Background(), took.Seconds(), metric.WithAttributes(attribute.String("work", work), attribute.String("outcome", outcome)))
}

// Reacted records the time from an event to the reconcile it caused.
func (m *Metrics) Reacted(took time.Duration) {
	m.queue.reaction.Record(context.Background(), max(took, 0).Seconds())
}

// ObserveDepth makes the depth gauge read the running queue.
func (m *Metrics) ObserveDepth(depth func() int) { m.queue.depthOf.Store(&depth) }
