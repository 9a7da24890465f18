package decide

import (
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// StartDrain records the start of a drain (DrainStarted), once per claim.
type StartDrain struct {
	Claim   string
	Node    string
	Pods    []string
	Timeout time.Duration
	Policy  string
}

func (c StartDrain) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c StartDrain) ClaimName() string { return c.Claim }

func (c StartDrain) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.Phase != projections.PhaseReady || cl.ScaleDown == nil || cl.Drain != nil {
		return nil, nil
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.DrainStarted{
		Ref:  claimRef(cl, fmt.Sprintf("drain before scale-down (%s by %s)", cl.ScaleDown.Request.Call, cl.ScaleDown.RequestedBy)),
		Node: c.Node, Pods: c.Pods, Timeout: events.Duration(c.Timeout), Policy: c.Policy,
	})}, nil
}

// TimeOutDrain records a drain past its timeout (DrainTimedOut), once.
type TimeOutDrain struct {
	Claim     string
	Remaining []string
}

func (c TimeOutDrain) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c TimeOutDrain) ClaimName() string { return c.Claim }

func (c TimeOutDrain) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.Drain == nil || cl.Drain.TimedOutAt != nil || cl.Phase != projections.PhaseReady {
		return nil, nil
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.DrainTimedOut{
		Ref:  claimRef(cl, fmt.Sprintf("drain of %s passed its timeout of %s", cl.Drain.Node, cl.Drain.Timeout)),
		Node: cl.Drain.Node, Policy: cl.Drain.Policy, Remaining: c.Remaining,
	})}, nil
}
