package projections

import "time"

// SlotResting is the reported state of a slot that is off and may not be
// claimed yet: its boots failed MaxConsecutiveAttempts times in a row and
// it rests until the streak expires (State.Exhausted).
const SlotResting SlotPhase = "resting"

// SlotStates are the states SlotState reports, in the order the metrics
// and the status list them.
var SlotStates = []SlotPhase{SlotOff, SlotResting, SlotPending, SlotBooting, SlotReady, SlotDraining, SlotDecommissioned}

// SlotState is SlotPhase with an off slot that rests after failed boots
// reported as resting. A report, like SlotPhase: nothing decides from it.
func (s *State) SlotState(slot string, now time.Time) SlotPhase {
	p := s.SlotPhase(slot)
	if p == SlotOff && s.Exhausted(slot, now) {
		return SlotResting
	}
	return p
}
