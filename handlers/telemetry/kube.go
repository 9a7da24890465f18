package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// claimstream_kube_write_failures_total{what=event|status}: Kubernetes
// Events and status ConfigMap writes the API refused or never answered
// (handlers/kube's EventRecorder and StatusWriter).
const InstKubeWriteFailures = "claimstream_kube_write_failures"

const descKubeWriteFailures = "Kubernetes Events (what=event) and status ConfigMap writes (what=status) that failed."

func (m *Metrics) newKubeInstruments(meter metric.Meter) error {
	var err error
	m.kubeWriteFailures, err = meter.Int64Counter(InstKubeWriteFailures, metric.WithDescription(descKubeWriteFailures))
	return err
}

// KubeWriteFailed counts one failed write (kube.EventRecorderMetrics).
func (m *Metrics) KubeWriteFailed(what string) {
	m.kubeWriteFailures.Add(context.Background(), 1, metric.WithAttributes(attribute.String("what", what)))
}
