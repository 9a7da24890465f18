package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// The deciders of the reactors that are not claim moves: observation,
// shutdowns and the machine-gone clock. Each is pure and level-based, and
// each carries the fact its reactor saw (the last shutdown Job it read), so
// a decision re-made after a conflict, or made twice, writes nothing twice.

// ObserveNode records what is observed of a slot's Node (NodeObserved), on
// change only.
type ObserveNode struct {
	Slot string
	Node events.NodeState
	// ReadySince is the Node's Ready condition lastTransitionTime (zero
	// when none): the instant of the power fact it leads to.
	ReadySince time.Time
}

func (c ObserveNode) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

func (c ObserveNode) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl := s.Slots[c.Slot]
	if sl == nil || sl.Group == "" {
		return nil, nil
	}
	power, powered := powerFact(s, sl, c.Node, c.ReadySince, now)
	nodeChanged := !NodeStatesEqual(sl.Node, c.Node)
	if !nodeChanged && !powered {
		return nil, nil
	}
	w := events.Write{Aggregate: events.SlotAggregate(sl.Name), Expected: sl.Seq}
	if nodeChanged {
		ref := events.Ref{Slot: sl.Name, Group: sl.Group, Cause: "node observed: " + describeNodeChange(sl.Node, c.Node)}
		if cl := s.LiveOfSlot(sl.Name); cl != nil {
			ref.Claim, ref.Attempt = cl.Name, cl.Attempt
		}
		w.Events = append(w.Events, events.Event{Time: now, Data: events.NodeObserved{Ref: ref, Node: normalNode(c.Node)}})
	}
	if powered {
		w.Events = append(w.Events, events.Event{Time: now, Data: power})
	}
	return []events.Write{w}, nil
}

// NodeStatesEqual compares two observations, taints as a set.
func NodeStatesEqual(a, b events.NodeState) bool {
	a, b = normalNode(a), normalNode(b)
	return a.Name == b.Name && a.ProviderID == b.ProviderID && a.Present == b.Present && a.Ready == b.Ready &&
		a.Unschedulable == b.Unschedulable && a.ToBeDeleted == b.ToBeDeleted && a.Address == b.Address &&
		slices.Equal(a.Taints, b.Taints)
}

func normalNode(n events.NodeState) events.NodeState {
	if !n.Present {
		return events.NodeState{}
	}
	if len(n.Taints) == 0 {
		n.Taints = nil
	} else {
		n.Taints = slices.Clone(n.Taints)
		slices.SortFunc(n.Taints, func(x, y events.Taint) int { return strings.Compare(x.String(), y.String()) })
	}
	return n
}

func describeNodeChange(was, is events.NodeState) string {
	switch {
	case !is.Present && was.Present:
		return "node object gone"
	case !is.Present:
		return "no node object"
	case !was.Present:
		return fmt.Sprintf("node registered (ready=%t, unschedulable=%t, %d taints)", is.Ready, is.Unschedulable, len(is.Taints))
	}
	var parts []string
	if was.Ready != is.Ready {
		parts = append(parts, fmt.Sprintf("ready %t -> %t", was.Ready, is.Ready))
	}
	if was.Unschedulable != is.Unschedulable {
		parts = append(parts, fmt.Sprintf("unschedulable %t -> %t", was.Unschedulable, is.Unschedulable))
	}
	if was.ToBeDeleted != is.ToBeDeleted {
		parts = append(parts, fmt.Sprintf("ToBeDeletedByClusterAutoscaler %t -> %t", was.ToBeDeleted, is.ToBeDeleted))
	}
	if len(parts) == 0 {
		parts = append(parts, "taints, address or providerID changed")
	}
	return strings.Join(parts, ", ")
}

// FailInPhase fails a claim only while it is still in Phase: a reactor's
// failure reason is about the phase it read (a Job failure is about a boot,
// a gate timeout about a boot, machine-gone about a ready claim).
type FailInPhase struct {
	FailClaim
	Phase projections.Phase
}

func (c FailInPhase) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.Phase.Normal() != c.Phase.Normal() {
		return nil, nil
	}
	return c.FailClaim.Decide(s, now)
}

// FireShutdown records one shutdown Job for a claim: the next of a marked
// claim's scale-down (counted, bounded by ShutdownAttemptLimit), or the one
// force shutdown of a failed claim whose slot has no live claim. After is
// the last shutdown Job the reactor saw on the claim; if another was fired
// since, nothing is written.
type FireShutdown struct {
	Claim string
	After string
	Force bool
	Cause string
}

func (c FireShutdown) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

func (c FireShutdown) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.LastShutdownJob != c.After {
		return nil, nil
	}
	if c.Force {
		if cl.Phase != projections.PhaseFailed || !cl.ForceShutdown || cl.LastShutdownJob != "" || s.LiveOfSlot(cl.Slot) != nil {
			return nil, nil
		}
	} else {
		if cl.Phase != projections.PhaseReady || cl.ScaleDown == nil || cl.ShutdownAttempts >= projections.ShutdownAttemptLimit {
			return nil, nil
		}
		if cl.ShutdownPausedUntil != nil && now.Before(*cl.ShutdownPausedUntil) {
			return nil, nil
		}
	}
	n := StopJobsFired(cl) + 1
	return []events.Write{slotWrite(s, cl.Slot, now, events.ShutdownFired{
		Ref: claimRef(cl, orCause(c.Cause, "shutdown")), Job: JobName(cl.Name, "stop", n),
		ShutdownAttempt: cl.ShutdownAttempts + 1, Force: c.Force,
	})}, nil
}

// StopJobsFired counts the shutdown Jobs ever fired for a claim (its Job
// names are <claim>-stop-<n>, n never reused across pauses). The views
// count them: the timeline coalesces repeated steps.
func StopJobsFired(cl *projections.Claim) int { return cl.StopJobs }

// LimitShutdown pauses a scale-down that fired ShutdownAttemptLimit Jobs
// with the machine still up: ShutdownAttemptLimitReached, paused for
// ShutdownAttemptResetGrace, after which the count restarts.
type LimitShutdown struct {
	Claim string
}

func (c LimitShutdown) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

func (c LimitShutdown) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.Phase != projections.PhaseReady || cl.ScaleDown == nil || cl.ShutdownAttempts < projections.ShutdownAttemptLimit {
		return nil, nil
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.ShutdownAttemptLimitReached{
		Ref:         claimRef(cl, fmt.Sprintf("%d shutdown Jobs finished and the machine is still observed up", cl.ShutdownAttempts)),
		Attempts:    cl.ShutdownAttempts,
		PausedUntil: now.Add(projections.ShutdownAttemptResetGrace),
	})}, nil
}

// FireSlotShutdown is the input law: a machine observed up with no live
// claim is shut down (ShutdownFired with no claim, Force). Attempts are
// counted on the slot's last shutdown, bounded by ShutdownAttemptLimit and
// paused ShutdownAttemptResetGrace like a scale-down's.
type FireSlotShutdown struct {
	Slot  string
	After string // the slot's last shutdown Job the reactor saw
	Cause string
}

func (c FireSlotShutdown) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

func (c FireSlotShutdown) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl := s.Slots[c.Slot]
	if sl == nil || sl.Group == "" || !(sl.PoweredOn() || sl.SeenOnByDriver()) || s.LiveOfSlot(c.Slot) != nil {
		return nil, nil
	}
	last := sl.LastShutdown
	lastJob := ""
	if last != nil {
		lastJob = last.Job
	}
	if lastJob != c.After {
		return nil, nil
	}
	attempt := 1
	if last != nil && last.Claim == "" && now.Before(last.At.Add(projections.ShutdownAttemptResetGrace)) {
		if last.Attempt >= projections.ShutdownAttemptLimit {
			return nil, nil // paused
		}
		attempt = last.Attempt + 1
	}
	return []events.Write{slotWrite(s, sl.Name, now, events.ShutdownFired{
		Ref:             events.Ref{Slot: sl.Name, Group: sl.Group, Cause: orCause(c.Cause, "input law: machine observed up with no claim that wants it")},
		Job:             SlotJobName(sl.Name, sl.Seq),
		ShutdownAttempt: attempt,
		Force:           true,
	})}, nil
}

// ObserveMachine starts (On false) or stops (On true) a ready claim's
// machine-gone clock.
type ObserveMachine struct {
	Claim string
	On    bool
	Cause string
}

func (c ObserveMachine) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

func (c ObserveMachine) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.Phase != projections.PhaseReady {
		return nil, nil
	}
	if c.On {
		if cl.MachineOffSince == nil {
			return nil, nil
		}
		return []events.Write{slotWrite(s, cl.Slot, now, events.MachineObservedOn{Ref: claimRef(cl, orCause(c.Cause, "machine observed up again"))})}, nil
	}
	if cl.MachineOffSince != nil {
		return nil, nil
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.MachineObservedOff{Ref: claimRef(cl, orCause(c.Cause, "machine observed off"))})}, nil
}

// The claim the command is about: its span joins the claim's trace.
func (c FireShutdown) ClaimName() string   { return c.Claim }
func (c LimitShutdown) ClaimName() string  { return c.Claim }
func (c ObserveMachine) ClaimName() string { return c.Claim }

// PauseSlotShutdown records the input law's pause (UnclaimedShutdownPaused)
// once the slot's last ShutdownAttemptLimit claimless shutdowns did not
// power the machine off: the claimless twin of LimitShutdown. After is the
// slot's last shutdown Job the reactor saw; the pause ends
// ShutdownAttemptResetGrace after it. Written once per pause.
type PauseSlotShutdown struct {
	Slot  string
	After string
}

func (c PauseSlotShutdown) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

func (c PauseSlotShutdown) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl := s.Slots[c.Slot]
	if sl == nil || sl.Group == "" || !sl.PoweredOn() || s.LiveOfSlot(c.Slot) != nil || sl.ShutdownPausedUntil != nil {
		return nil, nil
	}
	last := sl.LastShutdown
	if last == nil || last.Job != c.After || last.Claim != "" || last.Attempt < projections.ShutdownAttemptLimit {
		return nil, nil
	}
	until := last.At.Add(projections.ShutdownAttemptResetGrace)
	if !now.Before(until) {
		return nil, nil
	}
	return []events.Write{slotWrite(s, sl.Name, now, events.UnclaimedShutdownPaused{
		Ref:         events.Ref{Slot: sl.Name, Group: sl.Group, Cause: fmt.Sprintf("input law: %d shutdown Jobs finished and the machine no claim wants is still observed up", last.Attempt)},
		Attempts:    last.Attempt,
		PausedUntil: until,
	})}, nil
}

// RequestNodeDelete records that a slot's NotReady Node is deleted after
// its machine's shutdown (NodeDeleteRequested), once per shutdown: a delete
// already recorded since the slot's last shutdown writes nothing.
type RequestNodeDelete struct {
	Slot        string
	Node        string
	ShutdownJob string
}

func (c RequestNodeDelete) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

func (c RequestNodeDelete) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl := s.Slots[c.Slot]
	if sl == nil || sl.Group == "" || sl.LastShutdown == nil || sl.LastShutdown.Job != c.ShutdownJob || s.LiveOfSlot(c.Slot) != nil {
		return nil, nil
	}
	if d := sl.LastNodeDelete; d != nil && d.By == c.Node && !d.At.Before(sl.LastShutdown.At) {
		return nil, nil
	}
	ref := events.Ref{Slot: sl.Name, Group: sl.Group, Cause: "node cleanup: the machine's shutdown Job " + c.ShutdownJob + " finished and its Node is NotReady"}
	if n := len(sl.Claims); n > 0 {
		if cl := s.Claims[sl.Claims[n-1]]; cl != nil && cl.Phase.IsTerminal() {
			ref.Claim, ref.Attempt = cl.Name, cl.Attempt
		}
	}
	return []events.Write{slotWrite(s, sl.Name, now, events.NodeDeleteRequested{
		Ref: ref, Node: c.Node, Why: "NotReady after the shutdown of its machine (it counts against cluster-autoscaler's unready gate)",
	})}, nil
}
