package natsserver

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// The log monitor's view of the cluster: on a cluster the log can be
// written only while JetStream has a quorum (a meta leader and a majority
// of the replicas) and the log's stream has a leader. A lost quorum is no
// storage fault: restarting JetStream would not help, the missing replicas
// coming back does.

// clusterWatch is what the monitor remembers of the cluster between looks.
type clusterWatch struct {
	quorumLost bool
}

// StreamLeader is the server name of the stream's leader as this server
// knows it ("" while it has none, or without a cluster).
func (e *Embedded) StreamLeader(stream string) string {
	if !e.cfg.Cluster.Enabled() || stream == "" {
		return ""
	}
	acc, err := e.Server.JszAccount(&server.JSzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT, Streams: true})
	if err != nil || acc == nil {
		return ""
	}
	for _, sd := range acc.Streams {
		if sd.Name == stream && sd.Cluster != nil {
			return sd.Cluster.Leader
		}
	}
	return ""
}

// QuorumLostReason says, in an operator's words, why writes stop.
func QuorumLostReason(st ClusterStatus) string {
	return fmt.Sprintf("JetStream quorum lost: %d of %d replicas reachable; writes stop until %d are up", st.Reachable, st.Size, st.Needed())
}

// clusterVerdict is the monitor's judgement of the cluster; ok is false
// when the cluster is fine (or there is none) and the disk checks decide.
// It logs the loss and the return of the quorum, once each.
func (m *LogMonitor) clusterVerdict() (v verdict, ok bool) {
	if !m.emb.Clustered() {
		return verdict{}, false
	}
	st := m.emb.ClusterStatus()
	if st.Reachable >= st.Needed() && st.MetaLeader == "" {
		// Enough replicas, no leader yet: an election, not a lost quorum.
		return verdict{reason: fmt.Sprintf("JetStream is electing a meta leader (%d of %d replicas reachable)", st.Reachable, st.Size), serverFault: true}, true
	}
	if !st.Quorum() {
		if !m.cluster.quorumLost {
			m.cluster.quorumLost = true
			m.opts.Logger.Error(QuorumLostReason(st), "reachable", st.Reachable, "replicas", st.Size, "needed", st.Needed())
		}
		// Appends already sent will not be answered: a server fault, but
		// not one a restart of JetStream cures.
		return verdict{reason: QuorumLostReason(st), serverFault: true}, true
	}
	if m.cluster.quorumLost {
		m.cluster.quorumLost = false
		m.opts.Logger.Info(fmt.Sprintf("JetStream quorum back: %d of %d replicas reachable; writes resume", st.Reachable, st.Size), "meta_leader", st.MetaLeader)
	}
	if m.opts.Stream != "" && m.emb.StreamLeader(m.opts.Stream) == "" {
		return verdict{reason: fmt.Sprintf("the event log stream %s has no leader yet: JetStream is electing one", m.opts.Stream), serverFault: true}, true
	}
	return verdict{}, false
}

// healthzOptions: a single server's full check includes its streams'
// write errors; a cluster's would also count a replica that is catching
// up as a fault (and restart JetStream for it), so there only JetStream
// itself is checked, the quorum above.
func (m *LogMonitor) healthzOptions() *server.HealthzOptions {
	if m.emb.Clustered() {
		return &server.HealthzOptions{JSEnabledOnly: true}
	}
	return nil
}
