package projections

import "github.com/claimstream/claimstream/events"

// The host of a slot: the Node its machine registers as. A homelab machine
// registers under its slot's name and declared providerID; a machine a
// provisioning Job bought (a cloud-burst instance) registers under the name
// and providerID the Job reported (HostExpected, recorded on the slot as
// Host). Every reader that looks for a slot's Node asks NodeName and
// CurrentProviderID, and SlotForNode finds the slot from either.

// NodeName is the name of the slot's Node: the host its newest claim's
// startup Job reported, else the slot's own name.
func (sl *Slot) NodeName() string {
	if sl.Host != nil && sl.Host.Node != "" {
		return sl.Host.Node
	}
	return sl.Name
}

// CurrentProviderID is the providerID of the slot's machine: the one its
// newest claim's startup Job reported, else the declared (or default) one.
func (sl *Slot) CurrentProviderID() string {
	if sl.Host != nil && sl.Host.ProviderID != "" {
		return sl.Host.ProviderID
	}
	return sl.ProviderID()
}

// indexHost adds the slot's reported host to the lookups.
func indexHost(s *State, sl *Slot) {
	if sl.Retired || sl.Host == nil {
		return
	}
	if sl.Host.ProviderID != "" {
		s.index.providerID[sl.Host.ProviderID] = sl.Name
	}
	if sl.Host.Node != "" {
		s.index.node[sl.Host.Node] = sl.Name
	}
}

// unindexHost drops the slot's reported host from the lookups, where the
// entries are still the slot's own (the declared providerID stays).
func unindexHost(s *State, sl *Slot) {
	if sl.Host == nil {
		return
	}
	if p := sl.Host.ProviderID; p != "" && p != sl.ProviderID() && s.index.providerID[p] == sl.Name {
		delete(s.index.providerID, p)
	}
	if n := sl.Host.Node; n != "" && s.index.node[n] == sl.Name {
		delete(s.index.node, n)
	}
}

// setHost records the host the slot's newest claim expects (nil: none
// reported) and keeps the lookups in step.
func setHost(s *State, sl *Slot, h *ExpectedHost) {
	unindexHost(s, sl)
	sl.Host = h
	indexHost(s, sl)
}

// hostOfNewClaim forgets the previous claim's host: a new claim buys a new
// machine, which registers under the slot's own name until its startup Job
// reports another.
func hostOfNewClaim(s *State, e events.Event) error {
	d := e.Data.(events.ClaimCreated)
	if sl := s.Slots[d.Slot]; sl != nil && sl.Host != nil {
		setHost(s, sl, nil)
	}
	return nil
}

// hostOfRetiredSlot forgets a retired slot's host: it has no machine.
func hostOfRetiredSlot(s *State, e events.Event) error {
	d := e.Data.(events.SlotRetired)
	if sl := s.Slots[d.Slot]; sl != nil && sl.Host != nil {
		setHost(s, sl, nil)
	}
	return nil
}
