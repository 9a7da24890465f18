package projections

import (
	"fmt"
	"slices"
	"strings"

	"github.com/claimstream/claimstream/events"
)

// The folds of the elastic-host events (docs/design.md) and what the
// HostJoined, ScaleDecided, ClaimCreated and SlotRetired folds add for
// hosts; the moves table (evolve.go) runs them after those folds (then).

// then runs first, and next only if first applied.
func then(first, next func(*State, events.Event) error) func(*State, events.Event) error {
	return func(s *State, e events.Event) error {
		if err := first(s, e); err != nil {
			return err
		}
		return next(s, e)
	}
}

func hostExpected(s *State, e events.Event) error {
	d := e.Data.(events.HostExpected)
	c := s.Claims[d.Claim]
	if c == nil {
		return refuse(e, "claim %s is not in the views", d.Claim)
	}
	if !c.InBootWindow() {
		return refuse(e, "claim %s is %s: only a claim in its boot window expects a host", c.Name, c.Phase.Normal())
	}
	c.Expected = &ExpectedHost{At: e.Time, Node: d.Node, ProviderID: d.ProviderID, Address: d.Address, InstanceID: d.InstanceID, DeadlineAt: d.DeadlineAt}
	// The slot's machine is now this host, for every reader that looks for
	// its Node (NodeName, CurrentProviderID, SlotForNode).
	if sl := s.Slots[c.Slot]; sl != nil && len(sl.Claims) > 0 && sl.Claims[len(sl.Claims)-1] == c.Name {
		h := *c.Expected
		setHost(s, sl, &h)
	}
	detail := fmt.Sprintf("expects node %s (providerID %s", d.Node, d.ProviderID)
	if d.InstanceID != "" {
		detail += ", instance " + d.InstanceID
	}
	step(c, e, detail+") by "+d.DeadlineAt.UTC().Format("15:04:05"))
	return nil
}

func hostJoinedClaim(s *State, e events.Event) error {
	d := e.Data.(events.HostJoined)
	if c := s.Claims[d.Claim]; c != nil {
		c.Joined = &HostJoin{At: e.Time, Node: d.Node, MatchedBy: d.MatchedBy}
	}
	return nil
}

func drainStarted(s *State, e events.Event) error {
	d := e.Data.(events.DrainStarted)
	c := s.Claims[d.Claim]
	if c == nil {
		return refuse(e, "claim %s is not in the views", d.Claim)
	}
	if c.Phase != PhaseReady || c.ScaleDown == nil {
		return refuse(e, "claim %s is %s and not marked for scale-down: only such a claim's machine is drained", c.Name, c.Phase.Normal())
	}
	if c.Drain != nil {
		return refuse(e, "claim %s is already draining", c.Name)
	}
	c.Drain = &Drain{StartedAt: e.Time, Node: d.Node, Pods: slices.Clone(d.Pods), Timeout: d.Timeout, Policy: d.Policy}
	step(c, e, fmt.Sprintf("drain of %s: %d pods, timeout %s, then %s", d.Node, len(d.Pods), d.Timeout, d.Policy))
	return nil
}

func drainTimedOut(s *State, e events.Event) error {
	d := e.Data.(events.DrainTimedOut)
	c := s.Claims[d.Claim]
	if c == nil {
		return refuse(e, "claim %s is not in the views", d.Claim)
	}
	if c.Drain == nil {
		return refuse(e, "claim %s is not draining", c.Name)
	}
	if c.Drain.TimedOutAt != nil {
		return refuse(e, "claim %s: drain already timed out", c.Name)
	}
	at := e.Time
	c.Drain.TimedOutAt, c.Drain.Remaining = &at, slices.Clone(d.Remaining)
	step(c, e, fmt.Sprintf("drain timed out with %d pods left (%s): %s", len(d.Remaining), strings.Join(d.Remaining, ", "), d.Policy))
	return nil
}

func scaleDecidedNodes(s *State, e events.Event) error {
	d := e.Data.(events.ScaleDecided)
	if g := s.Groups[d.Group]; g != nil && g.LastDecision != nil {
		g.LastDecision.Nodes = d.Nodes
		g.LastDecision.Slots = slices.Clone(d.Slots)
	}
	return nil
}
