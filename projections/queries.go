package projections

import (
	"time"

	"github.com/claimstream/claimstream/events"
)

// IsLive: the claim holds its slot (pending, booting, ready; marked or not).
func (c *Claim) IsLive() bool { return c.Phase.IsLive() }

// IsPending: the claim can still be cancelled.
func (c *Claim) IsPending() bool { return c.Phase.IsPending() }

// InBootWindow: pending or booting, where the deadline applies.
func (c *Claim) InBootWindow() bool { return c.Phase.InBootWindow() }

// WantsMachine is the stronger question: a live claim not marked for
// scale-down. It is what TargetSize counts and what the input law asks.
func (c *Claim) WantsMachine() bool { return c.IsLive() && c.ScaleDown == nil }

// Overdue: in the boot window and past the deadline.
func (c *Claim) Overdue(now time.Time) bool {
	return c.InBootWindow() && c.DeadlineAt != nil && now.After(*c.DeadlineAt)
}

// ActiveGroup returns a declared, not retired group.
func (s *State) ActiveGroup(name string) (*Group, bool) {
	g := s.Groups[name]
	if g == nil || g.Retired {
		return nil, false
	}
	return g, true
}

// ActiveSlot returns a declared, not retired slot.
func (s *State) ActiveSlot(name string) (*Slot, bool) {
	sl := s.Slots[name]
	if sl == nil || sl.Retired {
		return nil, false
	}
	return sl, true
}

// LiveOfSlot is the slot's newest live claim, including one a scale-down has
// marked (it still owns the slot), or nil.
func (s *State) LiveOfSlot(slot string) *Claim {
	sl := s.Slots[slot]
	if sl == nil {
		return nil
	}
	for i := len(sl.Claims) - 1; i >= 0; i-- {
		if c := s.Claims[sl.Claims[i]]; c != nil && c.IsLive() {
			return c
		}
	}
	return nil
}

// LiveClaimsOfSlot lists every live claim of a slot, oldest first. More than
// one never holds: the store's expectations keep the service's writes from
// it, and the fold supersedes the older claim of a hand-written log.
func (s *State) LiveClaimsOfSlot(slot string) []*Claim {
	sl := s.Slots[slot]
	if sl == nil {
		return nil
	}
	return liveClaimsOf(s, sl)
}

// LiveClaims lists the live claims of a group's slots, in slot order.
func (s *State) LiveClaims(group string) []*Claim {
	g := s.Groups[group]
	if g == nil {
		return nil
	}
	var out []*Claim
	for _, slot := range g.Slots {
		if c := s.LiveOfSlot(slot); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// TargetSize is the number of live claims of the group that want a machine.
// Failed, completed and marked claims are never counted.
func (s *State) TargetSize(group string) int {
	n := 0
	for _, c := range s.LiveClaims(group) {
		if c.WantsMachine() {
			n++
		}
	}
	return n
}

// ClaimedSlots are the group's slots with a live claim (marked included).
func (s *State) ClaimedSlots(group string) []string {
	var out []string
	for _, c := range s.LiveClaims(group) {
		out = append(out, c.Slot)
	}
	return out
}

// FreeSlots are the group's slots IncreaseSize may claim: no live claim, not
// decommissioned, and not resting after MaxConsecutiveAttempts failed boots.
func (s *State) FreeSlots(group string, now time.Time) []string {
	g := s.Groups[group]
	if g == nil {
		return nil
	}
	var out []string
	for _, slot := range g.Slots {
		if s.IsFree(slot, now) {
			out = append(out, slot)
		}
	}
	return out
}

// IsFree: the slot may be claimed now.
func (s *State) IsFree(slot string, now time.Time) bool {
	sl, ok := s.ActiveSlot(slot)
	if !ok || sl.Decommissioned != nil {
		return false
	}
	return s.LiveOfSlot(slot) == nil && !s.Exhausted(slot, now)
}

// LiveInService counts the group's live claims on slots in service (not
// decommissioned): what maxSize bounds. A decommissioned slot's claim is on
// its way out and its slot is not counted in MaxSize either.
func (s *State) LiveInService(group string) int {
	n := 0
	for _, c := range s.LiveClaims(group) {
		if sl := s.Slots[c.Slot]; sl != nil && sl.Decommissioned == nil {
			n++
		}
	}
	return n
}

// MaxSize is the most live claims the group may hold: its slots in service,
// capped by the declared maxSize.
func (s *State) MaxSize(group string) int {
	g := s.Groups[group]
	if g == nil {
		return 0
	}
	n := 0
	for _, slot := range g.Slots {
		if sl := s.Slots[slot]; sl != nil && sl.Decommissioned == nil {
			n++
		}
	}
	if g.Spec.MaxSize > 0 && g.Spec.MaxSize < n {
		return g.Spec.MaxSize
	}
	return n
}

// NextAttempt is the attempt number of the next claim on the slot: 1 after
// a claim that reached ready (a success ends the streak), the last
// attempt + 1 after one that booted and failed, the same number after one
// that never booted (no machine was bought). A streak past
// MaxConsecutiveAttempts restarts at 1 once ShutdownAttemptResetGrace has
// passed since its last claim ended.
func (s *State) NextAttempt(slot string, now time.Time) int {
	sl := s.Slots[slot]
	if sl == nil || sl.LastClaim == nil || sl.LastClaim.ReachedReady {
		return 1
	}
	d := sl.LastClaim
	n := d.Attempt + 1
	if !d.Booted {
		n = max(d.Attempt, 1)
	}
	if n > MaxConsecutiveAttempts && d.FinishedAt != nil && !now.Before(d.FinishedAt.Add(ShutdownAttemptResetGrace)) {
		return 1
	}
	return n
}

// Exhausted: the slot's consecutive failed boots reached the bound and the
// pause has not passed; IncreaseSize leaves it alone.
func (s *State) Exhausted(slot string, now time.Time) bool {
	return s.NextAttempt(slot, now) > MaxConsecutiveAttempts
}

// PoweredOn: the slot's machine is observed up (its Node is present and
// Ready).
func (sl *Slot) PoweredOn() bool { return sl.Node.Present && sl.Node.Ready }

// ProviderID is the slot's providerID: declared, or homelab://<slot>.
func (sl *Slot) ProviderID() string {
	if sl.Spec.ProviderID != "" {
		return sl.Spec.ProviderID
	}
	return events.DefaultProviderID(sl.Name)
}

// SlotPhase derives the reported phase of a slot from (live claim,
// observation). It is a report, never an input to a decision.
func (s *State) SlotPhase(slot string) SlotPhase {
	sl := s.Slots[slot]
	if sl == nil {
		return SlotOff
	}
	live := s.LiveOfSlot(slot)
	switch {
	case live == nil && sl.PoweredOn():
		// Up with no claim: the input law is taking it down.
		return SlotDraining
	case live == nil && sl.Decommissioned != nil:
		return SlotDecommissioned
	case live == nil:
		return SlotOff
	case live.ScaleDown != nil:
		return SlotDraining
	case live.IsPending():
		return SlotPending
	case live.Phase == PhaseBooting:
		return SlotBooting
	case sl.PoweredOn() && !sl.Node.Unschedulable:
		return SlotReady
	default:
		// A ready claim whose machine is observed off or cordoned.
		return SlotBooting
	}
}

// SlotForNode finds the slot of a Kubernetes node: by providerID first
// (declared, or the one a startup Job reported), then by name (a slot is
// named like its Node unless its Job reported another name;
// cluster-autoscaler's fake nodes carry the instance id, which is the
// providerID, as both).
func (s *State) SlotForNode(name, providerID string) (*Slot, bool) {
	if providerID != "" {
		if slot, ok := s.byProviderID()[providerID]; ok {
			return s.Slots[slot], true
		}
	}
	if name != "" {
		if slot, ok := s.index.node[name]; ok {
			return s.Slots[slot], true
		}
		if sl, ok := s.ActiveSlot(name); ok {
			return sl, true
		}
		if slot, ok := s.byProviderID()[name]; ok {
			return s.Slots[slot], true
		}
	}
	return nil, false
}

func (s *State) byProviderID() map[string]string {
	return s.index.providerID
}
