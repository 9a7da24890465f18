package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/events/natsserver"
)

// Instruments of the NATS cluster (three replicas).
const (
	InstClusterPeersCurrent = "claimstream_jetstream_cluster_peers_current"
	InstClusterQuorum       = "claimstream_jetstream_quorum"
	// claimstream_log_stream_leader: 1 while this replica's server leads
	// the log's stream. The claimstream leader hands it away while every
	// replica is up, so that losing the leader costs no stream election.
	InstLogStreamLeader = "claimstream_log_stream_leader"
	// claimstream_lease_stream_leader: the same for the stream of the
	// key-value lease's bucket (on the key-value lease only).
	InstLeaseStreamLeader = "claimstream_lease_stream_leader"
)

// ObserveStreamLeader reports, as the gauge inst (InstLogStreamLeader or
// InstLeaseStreamLeader), whether this replica's server leads a stream.
func (m *Metrics) ObserveStreamLeader(inst string, ledHere func() bool) error {
	what := map[string]string{InstLogStreamLeader: "the log's", InstLeaseStreamLeader: "the key-value lease's"}[inst]
	if what == "" {
		return fmt.Errorf("no stream leader gauge %q", inst)
	}
	g, err := m.meter.Int64ObservableGauge(inst, metric.WithDescription("1 while this replica's server leads "+what+" JetStream stream."))
	if err != nil {
		return err
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		v := int64(0)
		if ledHere() {
			v = 1
		}
		o.ObserveInt64(g, v)
		return nil
	}, g)
	return err
}

// ObserveCluster reports what this replica sees of the JetStream cluster:
// the replicas it reaches (itself included) and whether JetStream has a
// quorum (1) or not (0, writes stop).
func (m *Metrics) ObserveCluster(status func() natsserver.ClusterStatus) error {
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
