package provider

import (
	"sync"
	"time"

	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// nodeGroupsCache keeps the last NodeGroups answer. The answer is a function
// of the views and of "now" (a slot resting after failed boots is not free
// until its pause ends), so an entry serves only the views it was built
// from (same State, same Seq) and only until the first such pause ends.
// Every appended event moves Seq, so a group change is seen by the next
// call; cluster-autoscaler's loop re-reads an unchanged pool for free.
type nodeGroupsCache struct {
	mu      sync.Mutex
	state   *projections.State
	seq     uint64
	builtAt time.Time
	until   time.Time // zero: nothing in the answer changes with time
	resp    *pb.NodeGroupsResponse
}

// get returns the cached answer for st at now, or nil.
func (c *nodeGroupsCache) get(st *projections.State, now time.Time) *pb.NodeGroupsResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.resp == nil || c.state != st || c.seq != st.Seq:
		return nil
	case now.Before(c.builtAt): // the clock went back: the pauses may differ
		return nil
	case !c.until.IsZero() && !now.Before(c.until):
		return nil
	}
	return c.resp
}

func (c *nodeGroupsCache) put(st *projections.State, now, until time.Time, resp *pb.NodeGroupsResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state, c.seq, c.builtAt, c.until, c.resp = st, st.Seq, now, until, resp
}

// restEnds is when slot stops resting (State.Exhausted turns false), or
// zero when it is not resting. It mirrors State.NextAttempt: a streak past
// MaxConsecutiveAttempts rests until ShutdownAttemptResetGrace after its
// last claim finished.
func restEnds(st *projections.State, slot string, now time.Time) time.Time {
	sl := st.Slots[slot]
	if sl == nil || sl.LastClaim == nil || sl.LastClaim.FinishedAt == nil || !st.Exhausted(slot, now) {
		return time.Time{}
	}
	return sl.LastClaim.FinishedAt.Add(projections.ShutdownAttemptResetGrace)
}

// earliest is the earlier of two instants, zero meaning "never".
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
