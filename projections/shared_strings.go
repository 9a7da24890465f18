package projections

// The views hold one copy of the strings many slots repeat: a slot's
// group, and in its last claim's digest and last shutdown the call, the
// requester, the reason, the phase and the cause. A snapshot's decode
// makes a copy of each per slot, and so does each event's; ten thousand
// slots would hold ten thousand copies of "cluster-autoscaler". The views
// point those fields at the copy they already hold (sharedStrings). The
// table is bounded: past maxSharedStrings a string is kept as it came, so
// no input grows it.

// sharedStrings maps a string to the copy the views hold.
type sharedStrings map[string]string

const maxSharedStrings = 4096

// share points *p at the views' copy of its string.
func (s *State) share(p *string) {
	if *p == "" {
		return
	}
	if v, ok := s.index.shared[*p]; ok {
		*p = v
		return
	}
	if s.index.shared == nil {
		s.index.shared = sharedStrings{}
	}
	if len(s.index.shared) < maxSharedStrings {
		s.index.shared[*p] = *p
	}
}

func (s *State) sharePhase(p *Phase) {
	v := string(*p)
	s.share(&v)
	*p = Phase(v)
}

// shareSlot shares the repeated strings of slot sl, whose key in Slots is
// name (decoded apart from its Name).
func (s *State) shareSlot(name string, sl *Slot) {
	if sl.Name == name {
		sl.Name = name
	}
	s.share(&sl.Group)
	if d := sl.LastClaim; d != nil {
		s.shareDigest(d)
	}
	if sh := sl.LastShutdown; sh != nil {
		s.shareShutdown(sl, sh)
	}
}

func (s *State) shareDigest(d *Digest) {
	s.sharePhase(&d.Phase)
	s.share(&d.Call)
	s.share(&d.Group)
	s.share(&d.RequestedBy)
	s.share(&d.Reason)
}

// shareShutdown shares sh's cause, and its claim with the slot's digest.
func (s *State) shareShutdown(sl *Slot, sh *Shutdown) {
	s.share(&sh.Cause)
	if d := sl.LastClaim; d != nil && sh.Claim == d.Claim {
		sh.Claim = d.Claim
	}
}
