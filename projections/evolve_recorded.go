package projections

import (
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
)

// The folds of the events that record a side effect before it is carried
// out, or a pause or an end with no claim move of its own: the input law's
// pause, a Node delete, and the deletion of a failed instance by
// cluster-autoscaler.

func unclaimedShutdownPaused(s *State, e events.Event) error {
	d := e.Data.(events.UnclaimedShutdownPaused)
	sl := s.Slots[d.Slot]
	if sl == nil {
		return refuse(e, "slot %s is not in the views", d.Slot)
	}
	until := d.PausedUntil
	sl.ShutdownPausedUntil = &until
	return nil
}

func nodeDeleteRequested(s *State, e events.Event) error {
	d := e.Data.(events.NodeDeleteRequested)
	sl := s.Slots[d.Slot]
	if sl == nil {
		return refuse(e, "slot %s is not in the views", d.Slot)
	}
	sl.LastNodeDelete = &Mark{At: e.Time, By: d.Node, Reason: d.Why}
	return nil
}

func failedInstanceDeleted(s *State, e events.Event) error {
	d := e.Data.(events.FailedInstanceDeleted)
	c := s.Claims[d.Claim]
	if c == nil {
		return refuse(e, "claim %s is not in the views", d.Claim)
	}
	if c.Phase != PhaseFailed {
		return refuse(e, "claim %s is %s: only a failed claim's instance is deleted this way", c.Name, c.Phase.Normal())
	}
	if c.InstanceDeleted != nil {
		return refuse(e, "claim %s: its instance is already deleted", c.Name)
	}
	c.InstanceDeleted = &Mark{At: e.Time, By: d.RequestedBy}
	step(c, e, fmt.Sprintf("failed instance deleted by %s", d.RequestedBy))
	return nil
}

// ListedFailure is the slot's newest claim when cluster-autoscaler is told
// about it as a failed instance: failed within RecentFailureWindow of now,
// no live claim on the slot, and its instance not deleted yet. Otherwise nil.
func (s *State) ListedFailure(slot string, now time.Time) *Claim {
	sl := s.Slots[slot]
	if sl == nil || sl.Retired || len(sl.Claims) == 0 || s.LiveOfSlot(slot) != nil {
		return nil
	}
	c := s.Claims[sl.Claims[len(sl.Claims)-1]]
	if c == nil || c.Phase != PhaseFailed || c.FinishedAt == nil || c.InstanceDeleted != nil || now.Sub(*c.FinishedAt) > RecentFailureWindow {
		return nil
	}
	return c
}

// outcomeOf is the outcome a JobObserved recorded, nil while the Job ran.
func outcomeOf(d events.JobObserved, e events.Event) *JobOutcome {
	if d.Outcome == "" {
		return nil
	}
	o := &JobOutcome{Outcome: d.Outcome, Reason: d.Reason, RecordedAt: e.Time}
	if d.FinishedAt != nil {
		o.FinishedAt = *d.FinishedAt
	}
	return o
}

// outcomeDetail is a timeline's word for a JobObserved with an outcome.
func outcomeDetail(first bool, how, outcome string) string {
	if first {
		return how + ", " + outcome
	}
	return outcome
}

// jobObserved marks the claim's startup Job, or the slot's last shutdown
// Job, as shown by the cluster: never created again for its attempt.
func jobObserved(s *State, e events.Event) error {
	d := e.Data.(events.JobObserved)
	sl := s.Slots[d.Slot]
	if sl == nil {
		return refuse(e, "slot %s is not in the views", d.Slot)
	}
	how := "found"
	if d.Created {
		how = "created"
	}
	switch d.Operation {
	case "startup":
		c := s.Claims[d.Claim]
		if c == nil {
			return refuse(e, "claim %s is not in the views", d.Claim)
		}
		if c.StartupJob != d.Job {
			return refuse(e, "claim %s: Job %s is not its startup Job %s", c.Name, d.Job, c.StartupJob)
		}
		first := !c.StartupJobObserved
		c.StartupJobObserved = true
		if o := outcomeOf(d, e); o != nil && c.StartupJobOutcome == nil {
			c.StartupJobOutcome = o
			how = outcomeDetail(first, how, d.Outcome)
		}
		step(c, e, "startup Job "+d.Job+" "+how)
	case "shutdown":
		ls := sl.LastShutdown
		if ls == nil || ls.Job != d.Job {
			return refuse(e, "slot %s: Job %s is not its last shutdown Job", sl.Name, d.Job)
		}
		first := !ls.Observed
		if first {
			at := e.Time
			ls.Observed, ls.ObservedAt = true, &at
		}
		if o := outcomeOf(d, e); o != nil && ls.Outcome == nil {
			ls.Outcome = o
			how = outcomeDetail(first, how, d.Outcome)
		}
		if c := s.Claims[d.Claim]; c != nil && c.LastShutdownJob == d.Job {
			step(c, e, "shutdown Job "+d.Job+" "+how)
		}
	default:
		return refuse(e, "operation %q is neither startup nor shutdown", d.Operation)
	}
	return nil
}
