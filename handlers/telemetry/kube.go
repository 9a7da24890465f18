package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// claimstream_kube_write_failures_total{what=event|status}: Kubernetes
// Events and status ConfigMap writes the API refused or never answered
// (handlers/kube's EventRecorder and StatusWriter).
const InstKubeWriteFailures = "claimstream_kube_write_failures"

const descKubeWriteFailures = "Kubernetes Events (what=event) and status ConfigMap writes (what=status) that failed."

// claimstream_kube_client_rate_limiter_seconds{verb}: how long each
// Kubernetes API request waited for the client's rate limiter
// (--kube-api-qps, --kube-api-burst) before it was sent.
const InstKubeRateLimiter = "claimstream_kube_client_rate_limiter"

const descKubeRateLimiter = "Time a Kubernetes API request waited for the client's rate limiter (--kube-api-qps, --kube-api-burst)."

// kubeRateLimiterBounds: a request that waits at all under the default
// limit waits milliseconds; seconds mean the limit is too low for the
// pool's bursts.
var kubeRateLimiterBounds = []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

func (m *Metrics) newKubeInstruments(meter metric.Meter) error {
	var err error
	if m.kubeWriteFailures, err = meter.Int64Counter(InstKubeWriteFailures, metric.WithDescription(descKubeWriteFailures)); err != nil {
		return err
	}
	m.kubeRateLimiter, err = meter.Float64Histogram(InstKubeRateLimiter, metric.WithUnit("s"),
		metric.WithDescription(descKubeRateLimiter), metric.WithExplicitBucketBoundaries(kubeRateLimiterBounds...))
	return err
}

// KubeRateLimited records one request's wait for the API client's rate
// limiter (kube.ObserveRateLimiterLatency).
func (m *Metrics) KubeRateLimited(verb string, wait time.Duration) {
	m.kubeRateLimiter.Record(context.Background(), wait.Seconds(), metric.WithAttributes(attribute.String("verb", verb)))
}

// KubeWriteFailed counts one failed write (kube.EventRecorderMetrics).
func (m *Metrics) KubeWriteFailed(what string) {
	m.kubeWriteFailures.Add(context.Background(), 1, metric.WithAttributes(attribute.String("what", what)))
}
