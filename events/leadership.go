package events

import (
	"fmt"
	"strconv"
)

// KindLeadership: the replicas' leadership. One aggregate (Leadership), so
// every LeaderElected is appended with the expectation of the last one: two
// replicas cannot both win one epoch.
const KindLeadership AggregateKind = "leadership"

// LeadershipName is the name of the one leadership aggregate.
const LeadershipName = "claimstream"

// Leadership is the aggregate of LeaderElected.
func Leadership() Aggregate { return Aggregate{Kind: KindLeadership, Name: LeadershipName} }

// TypeLeaderElected: a replica won the leader lease and leads the next
// epoch; it appends this before any leader-only work.
const TypeLeaderElected Type = "LeaderElected"

// LeaderElected: Replica won the lease and leads Epoch (the previous
// epoch + 1). Its provider and REST API answer on the addresses.
type LeaderElected struct {
	Replica     string `json:"replica"`
	Epoch       uint64 `json:"epoch"`
	GRPCAddress string `json:"grpcAddress,omitempty"`
	APIAddress  string `json:"apiAddress,omitempty"`
	// Cause says how the lease was won ("Lease claimstream/claimstream",
	// "key-value lease claimstream-leader").
	Cause string `json:"cause"`
}

// EventType is LeaderElected.
func (LeaderElected) EventType() Type { return TypeLeaderElected }

// Reference names no group, slot or claim: leadership is the process's.
func (d LeaderElected) Reference() Ref { return Ref{Cause: d.Cause} }

// ceSubjectOf is the CloudEvents subject of d: the replica for a
// leadership event, else the claim, slot or group (ceSubject).
func ceSubjectOf(d Data) string {
	if l, ok := d.(LeaderElected); ok {
		return l.Replica
	}
	return ceSubject(d.Reference())
}

// HeaderEpoch carries the leadership epoch of the replica that wrote the
// event (the CloudEvents extension leaderepoch). Events written before
// leadership epochs existed have none (Event.Epoch 0).
const HeaderEpoch = "ce-leaderepoch"

// parseEpoch reads HeaderEpoch: absent is 0, anything but a decimal
// uint64 is refused.
func parseEpoch(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a decimal epoch", HeaderEpoch, v)
	}
	return n, nil
}
