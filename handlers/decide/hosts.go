package decide

import (
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// ExpectedHostOf is the host a claim in its boot window expects: the one
// its startup Job reported (HostExpected), else its slot's own.
func ExpectedHostOf(sl *projections.Slot, cl *projections.Claim) *projections.ExpectedHost {
	if cl.Expected != nil {
		return cl.Expected
	}
	if sl == nil || !cl.InBootWindow() || cl.DeadlineAt == nil {
		return nil
	}
	return &projections.ExpectedHost{Node: sl.Name, ProviderID: sl.ProviderID(), Address: sl.Spec.Address, DeadlineAt: *cl.DeadlineAt}
}

// ExpectHost records the host a booting claim expects (HostExpected), once,
// and again when the instance id becomes known.
type ExpectHost struct {
	Claim      string
	Node       string
	ProviderID string
	Address    string
	InstanceID string
}

func (c ExpectHost) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c ExpectHost) ClaimName() string { return c.Claim }

func (c ExpectHost) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.Phase != projections.PhaseBooting || cl.DeadlineAt == nil {
		return nil, nil
	}
	if e := cl.Expected; e != nil && (e.InstanceID != "" || c.InstanceID == "") {
		return nil, nil
	}
	cause := "boot committed: expecting host " + c.Node
	if c.InstanceID != "" {
		cause = "startup Job reported instance " + c.InstanceID
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.HostExpected{
		Ref: claimRef(cl, cause), Node: c.Node, ProviderID: c.ProviderID, Address: c.Address,
		InstanceID: c.InstanceID, DeadlineAt: *cl.DeadlineAt,
	})}, nil
}

// JoinHost records the Node matched to a claim (HostJoined), once.
type JoinHost struct {
	Claim     string
	Node      string
	MatchedBy string
}

func (c JoinHost) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c JoinHost) ClaimName() string { return c.Claim }

func (c JoinHost) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.Joined != nil || (cl.Phase != projections.PhaseBooting && cl.Phase != projections.PhaseReady) {
		return nil, nil
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.HostJoined{
		Ref: claimRef(cl, "node "+c.Node+" registered, matched by "+c.MatchedBy), Node: c.Node, MatchedBy: c.MatchedBy,
	})}, nil
}

// StrayHostsSlot is the slot aggregate a group's stray hosts (Nodes that
// carry the group's label and are no slot of it) are reported on: one per
// group, never one per Node name, so strays cannot grow the views. Its name
// is no valid slot name (slot names are DNS-1123 subdomains), so it never
// meets a declared slot.
func StrayHostsSlot(group string) string { return "~stray-hosts." + group }

// RefuseHost reports a refused Node (HostJoinRefused), once per Node object
// (a Node created after the last report is a new join). Slot is the slot's
// name, or StrayHostsSlot when the Node is no slot.
type RefuseHost struct {
	Slot      string
	Group     string
	Node      string
	CreatedAt time.Time
	Why       string
}

func (c RefuseHost) LockKey(*projections.State) string { return c.Group }

func (c RefuseHost) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	var seq uint64
	if sl := s.Slots[c.Slot]; sl != nil {
		seq = sl.Seq
		if j := sl.LastJoinRefused; j != nil && j.By == c.Node && !j.At.Before(c.CreatedAt) {
			return nil, nil
		}
	}
	return []events.Write{{Aggregate: events.SlotAggregate(c.Slot), Expected: seq, Events: []events.Event{{Time: now, Data: events.HostJoinRefused{
		Ref: events.Ref{Slot: c.Slot, Group: c.Group, Cause: "host join refused: " + c.Why}, Node: c.Node, Why: c.Why,
	}}}}}, nil
}
