package decide

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Command is one request to change the pool. Decide is pure: it reads the
// views and the time it is given, and returns the writes that carry the
// decision out (each with the expectation of the aggregate it read), or a
// *Error saying why nothing may change. No writes and no error is a no-op.
type Command interface {
	// LockKey names what the command serializes on inside the leader:
	// its group, so two commands that span slots of one group never
	// interleave (maxSize, minSize floors).
	LockKey(s *projections.State) string
	Decide(s *projections.State, now time.Time) ([]events.Write, error)
}

// IncreaseSize creates Delta claims on Delta free slots of Group.
type IncreaseSize struct {
	Group       string
	Delta       int
	RequestedBy string
	// Call is the entry point recorded on the claims (default IncreaseSize;
	// the built-in scaler says Decide).
	Call string
	// RequestKey identifies the call among its retries (events.Request.Key;
	// the provider derives it): a call whose key the group accepted
	// within events.RequestRepeatWindow changes nothing and succeeds.
	RequestKey string
}

func (c IncreaseSize) LockKey(*projections.State) string { return c.Group }

func (c IncreaseSize) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	if c.Delta <= 0 {
		return nil, Refuse(CodeInvalidArgument, "delta must be positive, got %d", c.Delta)
	}
	g, ok := s.ActiveGroup(c.Group)
	if !ok {
		return nil, Refuse(CodeNotFound, "node group %q not found", c.Group)
	}
	if _, ok := s.AcceptedWithin(c.Group, c.RequestKey, now); ok {
		// A retry of a call that landed: its claims are in the views.
		return nil, nil
	}
	live := s.LiveInService(c.Group)
	if maxSize := s.MaxSize(c.Group); live+c.Delta > maxSize {
		return nil, Refuse(CodeFailedPrecondition, "%s", tooLarge(s, c, live, maxSize))
	}
	free := s.FreeSlots(c.Group, now)
	if len(free) < c.Delta {
		return nil, Refuse(CodeFailedPrecondition, "no free node slot in group %s: want %d, %d free (%s)", c.Group, c.Delta, len(free), whyNotFree(s, g, now))
	}
	// Healthier slots first: the fewest consecutive failed boots, then name.
	sort.SliceStable(free, func(i, j int) bool {
		return s.NextAttempt(free[i], now) < s.NextAttempt(free[j], now)
	})
	call := c.Call
	if call == "" {
		call = events.CallIncreaseSize
	}
	req := events.Request{Call: call, Delta: c.Delta, Group: c.Group, Key: c.RequestKey}
	cause := fmt.Sprintf("%s(+%d) by %s for group %s", call, c.Delta, orUnknown(c.RequestedBy), c.Group)
	writes := make([]events.Write, 0, c.Delta+1)
	for _, slot := range free[:c.Delta] {
		writes = append(writes, newClaim(s, g, s.Slots[slot], now, req, c.RequestedBy, cause))
	}
	return withScaleRequest(s, c, now, append(writes, sizeIncreased(g, now, events.Ref{Cause: cause}, c.RequestedBy, req, writes))), nil
}

// tooLarge says why an increase exceeds maxSize in the numbers a caller
// sees: the target size (what NodeGroupTargetSize reports) leaves out
// claims marked for scale-down, which still hold their slots until their
// machine is released, and maxSize bounds the slots held.
func tooLarge(s *projections.State, c IncreaseSize, live, maxSize int) string {
	releasing := 0
	for _, cl := range s.LiveClaims(c.Group) {
		if sl := s.Slots[cl.Slot]; sl != nil && sl.Decommissioned == nil && !cl.WantsMachine() {
			releasing++
		}
	}
	msg := fmt.Sprintf("size increase of group %s by %d too large: %d of its slots in service hold live claims, and %d + %d > maxSize %d", c.Group, c.Delta, live, live, c.Delta, maxSize)
	if releasing > 0 {
		msg += fmt.Sprintf(" (target size %d: %d of those claims are marked for scale-down, which the target size no longer counts, and hold their slots until their machine is off)", s.TargetSize(c.Group), releasing)
	}
	return msg
}

// whyNotFree explains a group's unclaimable slots.
func whyNotFree(s *projections.State, g *projections.Group, now time.Time) string {
	var claimed, decom, resting int
	for _, slot := range g.Slots {
		sl := s.Slots[slot]
		switch {
		case s.LiveOfSlot(slot) != nil:
			claimed++
		case sl.Decommissioned != nil:
			decom++
		case s.Exhausted(slot, now):
			resting++
		}
	}
	return fmt.Sprintf("%d claimed, %d decommissioned, %d resting after %d failed boots", claimed, decom, resting, projections.MaxConsecutiveAttempts)
}

// newClaim is the write that creates one claim on a slot: attempt seeded
// from the slot's digest, deadline from the group's budget.
func newClaim(s *projections.State, g *projections.Group, sl *projections.Slot, now time.Time, req events.Request, by, cause string) events.Write {
	name := ClaimName(sl.Name, sl.Seq, now)
	budget := projections.TimeoutsOf(g.Spec.Lifecycle).Budget()
	ev := events.ClaimCreated{
		Ref:                  events.Ref{Claim: name, Slot: sl.Name, Group: g.Name, Attempt: s.NextAttempt(sl.Name, now), Cause: cause},
		RequestedAt:          now,
		RequestedBy:          orUnknown(by),
		Request:              req,
		DeadlineAt:           projections.DeadlineAt(now, g.Spec),
		Budget:               events.Duration(budget),
		MaxNodeProvisionTime: g.Spec.MaxNodeProvisionTime,
		TTL:                  events.Duration(projections.ClaimTTL(g.Spec)),
	}
	return events.Write{Aggregate: events.SlotAggregate(sl.Name), Expected: sl.Seq, Events: []events.Event{{Time: now, Data: ev}}}
}

// DecreaseTargetSize cancels -Delta pending claims of Group. It never
// touches a booting or ready claim: a committed boot is reversed by its
// deadline or by DeleteNodes, never interrupted (docs/design.md).
type DecreaseTargetSize struct {
	Group       string
	Delta       int // negative
	RequestedBy string
}

func (c DecreaseTargetSize) LockKey(*projections.State) string { return c.Group }

func (c DecreaseTargetSize) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	if c.Delta >= 0 {
		return nil, Refuse(CodeInvalidArgument, "delta must be negative, got %d", c.Delta)
	}
	g, ok := s.ActiveGroup(c.Group)
	if !ok {
		return nil, Refuse(CodeNotFound, "node group %q not found", c.Group)
	}
	var pending []*projections.Claim
	var booting, ready int
	for _, cl := range s.LiveClaims(c.Group) {
		switch {
		case !cl.WantsMachine():
		case cl.IsPending():
			pending = append(pending, cl)
		case cl.Phase == projections.PhaseBooting:
			booting++
		case cl.Phase == projections.PhaseReady:
			ready++
		}
	}
	if len(pending)+booting+ready == 0 {
		// Already at the size asked for: nothing is counted.
		return nil, nil
	}
	if target := s.TargetSize(c.Group); target+c.Delta < g.Spec.MinSize {
		return nil, Refuse(CodeFailedPrecondition, "decrease of group %s by %d would take its target size from %d to %d, under minSize %d", c.Group, -c.Delta, target, target+c.Delta, g.Spec.MinSize)
	}
	if len(pending) < -c.Delta {
		return nil, Refuse(CodeUnavailable, "cannot decrease group %s by %d now: %d pending claims can be cancelled, %d booting and %d ready are past the cancelable phase (a boot ends at its deadline; remove a ready node with DeleteNodes)", c.Group, -c.Delta, len(pending), booting, ready)
	}
	// The newest requests go first: the oldest are closest to booting.
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].RequestedAt.After(pending[j].RequestedAt) })
	req := events.Request{Call: events.CallDecreaseTargetSize, Delta: c.Delta, Group: c.Group}
	cause := fmt.Sprintf("DecreaseTargetSize(%d) by %s for group %s", c.Delta, orUnknown(c.RequestedBy), c.Group)
	var writes []events.Write
	for _, cl := range pending[:-c.Delta] {
		writes = append(writes, slotWrite(s, cl.Slot, now, events.ClaimCancelled{
			Ref: claimRef(cl, cause), Reason: projections.ReasonCancelledByDecreaseTargetSize,
			RequestedBy: orUnknown(c.RequestedBy), Request: &req,
		}))
	}
	return withScaleRequest(s, c, now, append(writes, sizeDecreased(g, now, cause, c.RequestedBy, req, writes))), nil
}

// NodeRef names a node the way cluster-autoscaler does: its name and its
// providerID (for a fake node of an unregistered instance, both are the
// instance id).
type NodeRef struct {
	Name       string
	ProviderID string
}

// DeleteNodes takes the named nodes out of Group: a pending claim is
// cancelled, a booting or ready one is marked for scale-down (its shutdown
// follows), a failed instance still listed to cluster-autoscaler is
// recorded deleted (FailedInstanceDeleted), a marked or absent one is left
// as it is (idempotent).
type DeleteNodes struct {
	Group       string
	Nodes       []NodeRef
	RequestedBy string
	// Call is recorded on the request (default DeleteNodes).
	Call string
}

func (c DeleteNodes) LockKey(*projections.State) string { return c.Group }

func (c DeleteNodes) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	if len(c.Nodes) == 0 {
		return nil, Refuse(CodeInvalidArgument, "nodes: at least one node is required")
	}
	g, ok := s.ActiveGroup(c.Group)
	if !ok {
		return nil, Refuse(CodeNotFound, "node group %q not found", c.Group)
	}
	var slots []string
	var names []string
	for i, n := range c.Nodes {
		if n.Name == "" && n.ProviderID == "" {
			return nil, Refuse(CodeInvalidArgument, "nodes[%d]: name and providerID are both empty", i)
		}
		sl, ok := s.SlotForNode(n.Name, n.ProviderID)
		if !ok {
			return nil, Refuse(CodeNotFound, "nodes[%d]: node %q (providerID %q) is not a slot of any group", i, n.Name, n.ProviderID)
		}
		if sl.Group != g.Name {
			return nil, Refuse(CodeInvalidArgument, "nodes[%d]: node %q belongs to group %s, not %s", i, sl.Name, sl.Group, g.Name)
		}
		if !slices.Contains(slots, sl.Name) {
			slots = append(slots, sl.Name)
			names = append(names, nodeName(n))
		}
	}
	call := c.Call
	if call == "" {
		call = events.CallDeleteNodes
	}
	req := events.Request{Call: call, Group: c.Group, Nodes: names}
	cause := fmt.Sprintf("%s(%s) by %s for group %s", call, strings.Join(names, ","), orUnknown(c.RequestedBy), c.Group)
	var writes, removing []events.Write
	removed := 0
	for _, slot := range slots {
		cl := s.LiveOfSlot(slot)
		switch {
		case cl == nil:
			if w, ok := deleteFailedInstance(s, slot, now, req, orUnknown(c.RequestedBy), cause); ok {
				writes = append(writes, w)
			}
			continue
		case cl.ScaleDown != nil:
			continue
		case cl.IsPending():
			writes = append(writes, slotWrite(s, slot, now, events.ClaimCancelled{
				Ref: claimRef(cl, cause), Reason: projections.ReasonCancelledByDeleteNodes,
				RequestedBy: orUnknown(c.RequestedBy), Request: &req,
			}))
		default:
			writes = append(writes, slotWrite(s, slot, now, events.ScaleDownRequested{
				Ref: claimRef(cl, cause), RequestedBy: orUnknown(c.RequestedBy), Request: req, Reason: projections.ReasonScaledDown,
			}))
		}
		removing = append(removing, writes[len(writes)-1])
		removed++
	}
	// The floor is judged only when something is removed: cluster-autoscaler
	// deletes a failed instance every loop, and that must stay a no-op even
	// in a group already under minSize.
	if target := s.TargetSize(c.Group); removed > 0 && target-removed < g.Spec.MinSize {
		return nil, Refuse(CodeFailedPrecondition, "deleting %d nodes would take group %s to %d, under minSize %d", removed, c.Group, target-removed, g.Spec.MinSize)
	}
	if removed > 0 {
		writes = append(writes, sizeDecreased(g, now, cause, c.RequestedBy, req, removing))
	}
	return withScaleRequest(s, c, now, writes), nil
}

func nodeName(n NodeRef) string {
	if n.Name != "" {
		return n.Name
	}
	return n.ProviderID
}

// ManualClaim is an operator asking for a slot's machine by hand.
type ManualClaim struct {
	Slot   string
	By     string
	Reason string
}

func (c ManualClaim) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

func (c ManualClaim) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl, ok := s.ActiveSlot(c.Slot)
	if !ok {
		return nil, Refuse(CodeNotFound, "slot %q not found", c.Slot)
	}
	g, ok := s.ActiveGroup(sl.Group)
	if !ok {
		return nil, Refuse(CodeFailedPrecondition, "slot %s is in group %s, which is not declared", sl.Name, sl.Group)
	}
	if sl.Decommissioned != nil {
		return nil, Refuse(CodeFailedPrecondition, "slot %s is decommissioned (by %s at %s); recommission it first", sl.Name, sl.Decommissioned.By, sl.Decommissioned.At.Format(time.RFC3339))
	}
	if live := s.LiveOfSlot(sl.Name); live != nil {
		return nil, Refuse(CodeFailedPrecondition, "slot %s already has live claim %s (%s)", sl.Name, live.Name, live.Phase.Normal())
	}
	if s.Exhausted(sl.Name, now) {
		return nil, Refuse(CodeFailedPrecondition, "slot %s failed %d consecutive boots; it rests until %s", sl.Name, projections.MaxConsecutiveAttempts, sl.LastClaim.FinishedAt.Add(projections.ShutdownAttemptResetGrace).Format(time.RFC3339))
	}
	if live, maxSize := s.LiveInService(g.Name), s.MaxSize(g.Name); live+1 > maxSize {
		return nil, Refuse(CodeFailedPrecondition, "group %s is at maxSize %d", g.Name, maxSize)
	}
	by := orUnknown(c.By)
	cause := "manual claim by " + by
	if c.Reason != "" {
		cause += ": " + c.Reason
	}
	req := events.Request{Call: events.CallManual, Group: g.Name}
	claim := newClaim(s, g, sl, now, req, by, cause)
	return []events.Write{claim, sizeIncreased(g, now, events.Ref{Cause: cause}, by, req, []events.Write{claim})}, nil
}

// DeleteClaim ends a claim by hand: cancelled if pending, scaled down if
// booting or ready.
type DeleteClaim struct {
	Claim string
	By    string
}

func (c DeleteClaim) LockKey(s *projections.State) string {
	if cl := s.Claims[c.Claim]; cl != nil {
		return groupOfSlot(s, cl.Slot)
	}
	return ""
}

func (c DeleteClaim) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil {
		return nil, Refuse(CodeNotFound, "claim %q not found", c.Claim)
	}
	if !cl.IsLive() {
		return nil, Refuse(CodeFailedPrecondition, "claim %s already ended %s (%s)", cl.Name, cl.Phase, cl.Reason)
	}
	by := orUnknown(c.By)
	cause := "claim deleted by hand by " + by
	req := events.Request{Call: events.CallDeleteClaim, Group: cl.Group}
	switch {
	case cl.ScaleDown != nil:
		return nil, nil
	case cl.IsPending():
		return []events.Write{slotWrite(s, cl.Slot, now, events.ClaimCancelled{
			Ref: claimRef(cl, cause), Reason: projections.ReasonDeletedByHand, RequestedBy: by, Request: &req,
		})}, nil
	default:
		return []events.Write{slotWrite(s, cl.Slot, now, events.ScaleDownRequested{
			Ref: claimRef(cl, cause), RequestedBy: by, Request: req, Reason: projections.ReasonDeletedByHand,
		})}, nil
	}
}

// Decommission takes a slot out of service: no new claims; its live claim
// is cancelled (pending) or scaled down (booting, ready) on the same write.
type Decommission struct {
	Slot   string
	By     string
	Reason string
}

func (c Decommission) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

func (c Decommission) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl, ok := s.ActiveSlot(c.Slot)
	if !ok {
		return nil, Refuse(CodeNotFound, "slot %q not found", c.Slot)
	}
	if sl.Decommissioned != nil {
		return nil, nil
	}
	by := orUnknown(c.By)
	cause := "decommissioned by " + by
	if c.Reason != "" {
		cause += ": " + c.Reason
	}
	evs := []events.Event{{Time: now, Data: events.SlotDecommissioned{
		Ref: events.Ref{Slot: sl.Name, Group: sl.Group, Cause: cause}, By: by, Reason: c.Reason,
	}}}
	req := events.Request{Call: events.CallDecommission, Group: sl.Group}
	if cl := s.LiveOfSlot(sl.Name); cl != nil && cl.ScaleDown == nil {
		if cl.IsPending() {
			evs = append(evs, events.Event{Time: now, Data: events.ClaimCancelled{
				Ref: claimRef(cl, cause), Reason: projections.ReasonDecommissioned, RequestedBy: by, Request: &req,
			}})
		} else {
			evs = append(evs, events.Event{Time: now, Data: events.ScaleDownRequested{
				Ref: claimRef(cl, cause), RequestedBy: by, Request: req, Reason: projections.ReasonDecommissioned,
			}})
		}
	}
	return []events.Write{{Aggregate: events.SlotAggregate(sl.Name), Expected: sl.Seq, Events: evs}}, nil
}

// Recommission puts a decommissioned slot back into service.
type Recommission struct {
	Slot string
	By   string
}

func (c Recommission) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

func (c Recommission) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	sl, ok := s.ActiveSlot(c.Slot)
	if !ok {
		return nil, Refuse(CodeNotFound, "slot %q not found", c.Slot)
	}
	if sl.Decommissioned == nil {
		return nil, nil
	}
	by := orUnknown(c.By)
	return []events.Write{slotWrite(s, sl.Name, now, events.SlotRecommissioned{
		Ref: events.Ref{Slot: sl.Name, Group: sl.Group, Cause: "recommissioned by " + by}, By: by,
	})}, nil
}

// --- helpers ---------------------------------------------------------------

// slotWrite is one event appended to a slot with the slot's expectation.
func slotWrite(s *projections.State, slot string, now time.Time, d events.Data) events.Write {
	return events.Write{
		Aggregate: events.SlotAggregate(slot),
		Expected:  s.Slots[slot].Seq,
		Events:    []events.Event{{Time: now, Data: d}},
	}
}

func claimRef(c *projections.Claim, cause string) events.Ref {
	return events.Ref{Claim: c.Name, Slot: c.Slot, Group: c.Group, Attempt: c.Attempt, Cause: cause}
}

func groupOfSlot(s *projections.State, slot string) string {
	if sl := s.Slots[slot]; sl != nil {
		return sl.Group
	}
	return ""
}

func orUnknown(by string) string {
	if by == "" {
		return "unknown"
	}
	return by
}
