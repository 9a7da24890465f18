package decide

import (
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// The operations of a lifecycle Job: its LabelOperation and EnvOperation.
const (
	OperationStartup  = "startup"
	OperationShutdown = "shutdown"
)

// ObserveJob records that the cluster showed a lifecycle Job the log
// recorded (JobObserved): the claim's startup Job, or the slot's last
// shutdown Job. Once recorded, the Job is never created again for its
// attempt: a Job gone from the cluster (its TTL, a person) ran. Written
// when the Job is first shown, and once more with its Outcome when it is
// seen finished (one write when it is first shown finished).
type ObserveJob struct {
	Slot      string
	Claim     string // empty: an input-law shutdown
	Job       string
	Operation string // OperationStartup | OperationShutdown
	Created   bool
	// Outcome, FinishedAt and Reason: how the Job ended (jobOutcome);
	// Outcome empty while it runs.
	Outcome    string
	FinishedAt *time.Time
	Reason     string
	// Message: a failed Job's own word on its failure.
	Message string
	Cause   string
}

func (c ObserveJob) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c ObserveJob) ClaimName() string { return c.Claim }

func (c ObserveJob) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl := s.Slots[c.Slot]
	if sl == nil || sl.Group == "" {
		return nil, nil
	}
	ref := events.Ref{Slot: sl.Name, Group: sl.Group, Claim: c.Claim, Cause: c.Cause}
	switch c.Operation {
	case OperationStartup:
		cl := s.Claims[c.Claim]
		if cl == nil || cl.StartupJob != c.Job || cl.StartupJobObserved && (c.Outcome == "" || cl.StartupJobOutcome != nil) {
			return nil, nil
		}
		ref = claimRef(cl, c.Cause)
	case OperationShutdown:
		if ls := sl.LastShutdown; ls == nil || ls.Job != c.Job || ls.Observed && (c.Outcome == "" || ls.Outcome != nil) {
			return nil, nil
		}
		if cl := s.Claims[c.Claim]; cl != nil {
			ref = claimRef(cl, c.Cause)
		}
	default:
		return nil, fmt.Errorf("observe Job %s: operation %q is neither %s nor %s", c.Job, c.Operation, OperationStartup, OperationShutdown)
	}
	return []events.Write{slotWrite(s, sl.Name, now, events.JobObserved{
		Ref: ref, Job: c.Job, Operation: c.Operation, Created: c.Created,
		Outcome: c.Outcome, FinishedAt: c.FinishedAt, Reason: c.Reason, Message: c.Message,
	})}, nil
}
