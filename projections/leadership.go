package projections

import (
	"time"

	"github.com/claimstream/claimstream/events"
)

// Leader is the view of the replicas' leadership: who leads which epoch
// since when, and where its provider and REST API answer.
type Leader struct {
	Replica     string    `json:"replica,omitempty"`
	Epoch       uint64    `json:"epoch,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	GRPCAddress string    `json:"grpcAddress,omitempty"`
	APIAddress  string    `json:"apiAddress,omitempty"`
	// Seq is the last sequence of the leadership aggregate: the
	// expectation of the next LeaderElected.
	Seq uint64 `json:"seq"`
}

// leaderElected records the new epoch. An epoch that does not follow the
// current one (a log merged from elsewhere) is refused.
func leaderElected(s *State, e events.Event) error {
	d := e.Data.(events.LeaderElected)
	if s.Leader == nil {
		s.Leader = &Leader{}
	}
	if d.Epoch <= s.Leader.Epoch {
		return refuse(e, "epoch %d of %s is not after epoch %d of %s", d.Epoch, d.Replica, s.Leader.Epoch, s.Leader.Replica)
	}
	seq := s.Leader.Seq
	*s.Leader = Leader{Replica: d.Replica, Epoch: d.Epoch, Since: e.Time, GRPCAddress: d.GRPCAddress, APIAddress: d.APIAddress, Seq: seq}
	return nil
}

// CurrentLeader is the leader the views know (zero: none yet).
func (s *State) CurrentLeader() Leader {
	if s.Leader == nil {
		return Leader{}
	}
	return *s.Leader
}
