package decide

import (
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// The power facts (events/power.go) the observer writes with a Node
// observation: when the Node's Present and Ready stop agreeing with the
// slot's last power fact, MachinePoweredOn or MachinePoweredOff records the
// change, at the Ready condition's lastTransitionTime when that lies
// between the last power fact and now (a clock-skewed or stale condition
// must not reorder the facts), else at the observation.

// PoweredOn: an observation of a machine that is up.
func PoweredOn(n events.NodeState) bool { return n.Present && n.Ready }

// powerFact is the power fact observing n on sl calls for, if any.
func powerFact(s *projections.State, sl *projections.Slot, n events.NodeState, readySince, now time.Time) (events.Data, bool) {
	on := PoweredOn(n)
	if on == sl.PoweredOnRecorded() {
		return nil, false
	}
	if !n.Present && sl.Power != nil && sl.Power.Driver {
		// No Node to tell: the power driver's reading stands (ObservePower).
		return nil, false
	}
	at, source := now, events.AtObserved
	var floor time.Time
	if sl.Power != nil {
		floor = sl.Power.At
	}
	if n.Present && !readySince.IsZero() && !readySince.After(now) && !readySince.Before(floor) {
		at, source = readySince.UTC(), events.AtNodeCondition
	}
	name := n.Name
	if name == "" {
		name = sl.Node.Name
	}
	ref := events.Ref{Slot: sl.Name, Group: sl.Group}
	live := s.LiveOfSlot(sl.Name)
	if live != nil {
		ref.Claim, ref.Attempt = live.Name, live.Attempt
	}
	if on {
		ref.Cause = "power observed: node " + name + " Ready"
		return events.MachinePoweredOn{Ref: ref, Node: name, At: at, AtSource: source}, true
	}
	reason := offReason(sl, live, &ref, events.PowerOffNotReady)
	seen := "NotReady"
	if !n.Present {
		reason, seen = events.PowerOffNodeDeleted, "gone"
	}
	ref.Cause = "power observed: node " + name + " " + seen + " (" + reason + ")"
	return events.MachinePoweredOff{Ref: ref, Node: name, At: at, AtSource: source, Reason: reason}, true
}

// offReason is why sl's machine went off: a shutdown fired since it came
// on explains it (the input law's, or a claim's, whose claim ref takes
// when no claim is live), else fallback.
func offReason(sl *projections.Slot, live *projections.Claim, ref *events.Ref, fallback string) string {
	last := sl.LastShutdown
	if last == nil || sl.Power == nil || last.At.Before(sl.Power.At) {
		return fallback
	}
	if last.Claim == "" {
		return events.PowerOffInputLaw
	}
	if live == nil {
		ref.Claim, ref.Attempt = last.Claim, last.Attempt
	}
	return events.PowerOffShutdown
}

// ObservePower records what the slot's power driver read of its machine
// while the slot has no Node and no live claim: MachinePoweredOn or
// MachinePoweredOff when it disagrees with the slot's last power fact, so
// a machine switched on by hand is seen before its kubelet joins (the
// input law), and seen off once switched off. Where a Node exists its
// observation rules, and a claim's machine is on from its Node's Ready
// (its boot lasts until then, as the cost report counts it).
type ObservePower struct {
	Slot string
	On   bool
	// Reading names the driver's view of the machine (ipmi:10.0.0.21:623),
	// for the cause.
	Reading string
}

func (c ObservePower) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

func (c ObservePower) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl := s.Slots[c.Slot]
	if sl == nil || sl.Group == "" || sl.Node.Present || c.On == sl.PoweredOnRecorded() || s.LiveOfSlot(c.Slot) != nil {
		return nil, nil
	}
	ref := events.Ref{Slot: sl.Name, Group: sl.Group}
	if c.On {
		ref.Cause = "power observed: " + c.Reading + " on, no node"
		return []events.Write{slotWrite(s, sl.Name, now, events.MachinePoweredOn{Ref: ref, At: now, AtSource: events.AtPowerDriver})}, nil
	}
	reason := offReason(sl, nil, &ref, events.PowerOffDriver)
	ref.Cause = "power observed: " + c.Reading + " off, no node (" + reason + ")"
	return []events.Write{slotWrite(s, sl.Name, now, events.MachinePoweredOff{Ref: ref, At: now, AtSource: events.AtPowerDriver, Reason: reason})}, nil
}
