package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/events"
)

// Instruments of the NATS cluster (three replicas).
const (
	InstClusterPeersCurrent = "claimstream_jetstream_cluster_peers_current"
	InstClusterQuorum       = "claimstream_jetstream_quorum"
)

// ObserveCluster reports what this replica sees of the JetStream cluster:
// the replicas it reaches (itself included) and whether JetStream has a
// quorum (1) or not (0, writes stop).
func (m *Metrics) ObserveCluster(status func() events.ClusterStatus) error {
	peers, err := m.meter.Int64ObservableGauge(InstClusterPeersCurrent, metric.WithDescription("Replicas of the NATS cluster this one is connected to, itself included."))
	if err != nil {
		return err
	}
	quorum, err := m.meter.Int64ObservableGauge(InstClusterQuorum, metric.WithDescription("1 while JetStream has a meta leader and a majority of the replicas, 0 while writes stop."))
	if err != nil {
		return err
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := status()
		q := int64(0)
		if st.Quorum() {
			q = 1
		}
		o.ObserveInt64(peers, int64(st.Reachable))
		o.ObserveInt64(quorum, q)
		return nil
	}, peers, quorum)
	return err
}
