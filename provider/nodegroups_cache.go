package provider

import (
	"time"

	"github.com/claimstream/claimstream/projections"
)

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
