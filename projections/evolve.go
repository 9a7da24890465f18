package projections

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/claimstream/claimstream/events"
)

// RefusedError says why Evolve did not apply a well-formed event. The event
// stays in the log and its sequence still counts; the views are unchanged.
type RefusedError struct {
	Seq    uint64
	Type   events.Type
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("seq %d %s refused: %s", e.Seq, e.Type, e.Reason)
}

func refuse(e events.Event, format string, args ...any) error {
	return &RefusedError{Seq: e.Seq, Type: e.Type, Reason: fmt.Sprintf(format, args...)}
}

// Evolve folds one event into s. It is deterministic and does no I/O: the
// same log always gives the same state. It never panics on what it reads:
// an entry without data (unknown type, bad data) only advances the
// sequences; an event the model refuses (an illegal move) is counted,
// reported as a *RefusedError, and changes nothing else.
func Evolve(s *State, e events.Event) error {
	if e.Seq != 0 {
		if e.Seq <= s.Seq {
			return nil // already folded (a tail that restarted a little early)
		}
		s.Seq = e.Seq
	}
	bumpAggregate(s, e)
	if e.Data == nil {
		s.Stats.Skipped++
		return nil
	}
	move, ok := moves[e.Data.EventType()]
	if !ok {
		s.Stats.Skipped++
		return nil
	}
	if err := move(s, e); err != nil {
		s.Stats.Refused++
		return err
	}
	s.Stats.Applied++
	return nil
}

// bumpAggregate records e's sequence as its aggregate's last, whatever the
// event is: the store's expectation counts every entry on the subject, so
// the view must too, or a single unreadable entry would make the slot
// unwritable.
func bumpAggregate(s *State, e events.Event) {
	if e.Seq == 0 || e.Aggregate.Name == "" {
		return
	}
	switch e.Aggregate.Kind {
	case events.KindSlot:
		sl := s.Slots[e.Aggregate.Name]
		if sl == nil {
			// An event on a slot not (yet) declared: keep the sequence, so
			// the declaration's expectation is right.
			sl = &Slot{Name: e.Aggregate.Name, Retired: true, Claims: []string{}}
			s.Slots[sl.Name] = sl
		}
		sl.Seq = e.Seq
	case events.KindGroup:
		g := s.Groups[e.Aggregate.Name]
		if g == nil {
			g = &Group{Name: e.Aggregate.Name, Retired: true, Slots: []string{}}
			s.Groups[g.Name] = g
		}
		g.Seq = e.Seq
	case events.KindLeadership:
		if s.Leader == nil {
			s.Leader = &Leader{}
		}
		s.Leader.Seq = e.Seq
	}
}

// moves is the table: one entry per event type, one place per rule.
var moves = map[events.Type]func(*State, events.Event) error{
	events.TypeGroupDeclared: groupDeclared,
	events.TypeGroupChanged:  groupChanged,
	events.TypeGroupRetired:  groupRetired,
	// The built-in scaler's decision, then the Nodes it expects.
	events.TypeScaleDecided: then(scaleDecided, scaleDecidedNodes),
	// Demand facts (evolve_demand.go): a call and an observation, recorded.
	events.TypeScaleRequested: scaleRequested,
	events.TypeDemandObserved: demandObserved,

	events.TypeSlotDeclared:       slotDeclared,
	events.TypeSlotChanged:        slotChanged,
	events.TypeSlotRetired:        then(slotRetired, hostOfRetiredSlot),
	events.TypeSlotDecommissioned: slotDecommissioned,
	events.TypeSlotRecommissioned: slotRecommissioned,

	events.TypeClaimCreated:    then(claimCreated, hostOfNewClaim),
	events.TypeClaimBooting:    claimMove(PhaseBooting),
	events.TypeClaimReady:      claimMove(PhaseReady),
	events.TypeClaimFailed:     claimMove(PhaseFailed),
	events.TypeClaimCancelled:  claimMove(PhaseCompleted),
	events.TypeClaimCompleted:  claimMove(PhaseCompleted),
	events.TypeClaimSuperseded: claimMove(PhaseFailed),

	events.TypeScaleDownRequested:          scaleDownRequested,
	events.TypeShutdownFired:               shutdownFired,
	events.TypeShutdownAttemptLimitReached: shutdownLimitReached,
	events.TypeMachineObservedOff:          machineObserved(false),
	events.TypeMachineObservedOn:           machineObserved(true),
	events.TypeClaimCollected:              claimCollected,

	events.TypeNodeObserved:    nodeObserved,
	events.TypeHostJoined:      then(hostJoined, hostJoinedClaim),
	events.TypeHostJoinRefused: hostJoinRefused,

	// Elastic hosts (evolve_hosts.go).
	events.TypeHostExpected:  hostExpected,
	events.TypeDrainStarted:  drainStarted,
	events.TypeDrainTimedOut: drainTimedOut,

	// Power facts (evolve_power.go).
	events.TypeMachinePoweredOn:  powerFact,
	events.TypeMachinePoweredOff: powerFact,

	// Side effects recorded before they are carried out, and pauses
	// (evolve_recorded.go).
	events.TypeUnclaimedShutdownPaused: unclaimedShutdownPaused,
	events.TypeNodeDeleteRequested:     nodeDeleteRequested,
	events.TypeFailedInstanceDeleted:   failedInstanceDeleted,
	events.TypeJobObserved:             jobObserved,

	events.TypeLeaderElected: leaderElected,

	// The group-size events sum up claim events of the same batch: their
	// sequence is the group's expectation (bumpAggregate); the claims are
	// folded from their own events.
	events.TypeSizeIncreased: sizeIncreased,
	events.TypeSizeDecreased: func(*State, events.Event) error { return nil },
}

// --- groups ---------------------------------------------------------------

func groupDeclared(s *State, e events.Event) error {
	d := e.Data.(events.GroupDeclared)
	g := s.Groups[d.Group]
	if g != nil && !g.Retired {
		return refuse(e, "group %s is already declared", d.Group)
	}
	if g == nil {
		g = &Group{Name: d.Group, Slots: []string{}}
		s.Groups[d.Group] = g
	}
	g.Spec, g.Retired = d.Spec, false
	// Slots declared while the group was away (or before it) join it again.
	g.Slots = g.Slots[:0]
	for name, sl := range s.Slots {
		if sl.Group == d.Group && !sl.Retired {
			g.Slots = append(g.Slots, name)
		}
	}
	slices.Sort(g.Slots)
	return nil
}

func groupChanged(s *State, e events.Event) error {
	d := e.Data.(events.GroupChanged)
	g := s.Groups[d.Group]
	if g == nil || g.Retired {
		return refuse(e, "group %s is not declared", d.Group)
	}
	g.Spec = d.Spec
	return nil
}

func groupRetired(s *State, e events.Event) error {
	d := e.Data.(events.GroupRetired)
	g := s.Groups[d.Group]
	if g == nil || g.Retired {
		return refuse(e, "group %s is not declared", d.Group)
	}
	g.Retired = true
	return nil
}

func scaleDecided(s *State, e events.Event) error {
	d := e.Data.(events.ScaleDecided)
	g := s.Groups[d.Group]
	if g == nil || g.Retired {
		return refuse(e, "group %s is not declared", d.Group)
	}
	g.LastDecision = &ScaleDecided{At: e.Time, Demand: d.Demand, Target: d.Target, Action: d.Action, Reason: d.Reason}
	return nil
}

// --- slot config ----------------------------------------------------------

func slotDeclared(s *State, e events.Event) error {
	d := e.Data.(events.SlotDeclared)
	sl := s.Slots[d.Slot]
	if sl != nil && !sl.Retired {
		return refuse(e, "slot %s is already declared", d.Slot)
	}
	if sl == nil {
		sl = &Slot{Name: d.Slot, Claims: []string{}}
		s.Slots[d.Slot] = sl
	}
	sl.Group, sl.Spec, sl.Retired = d.Group, d.Spec, false
	s.share(&sl.Group)
	s.shareSpecMaps(&sl.Spec)
	joinGroup(s, sl)
	s.index.providerID[sl.ProviderID()] = sl.Name
	return nil
}

func slotChanged(s *State, e events.Event) error {
	d := e.Data.(events.SlotChanged)
	sl := s.Slots[d.Slot]
	if sl == nil || sl.Retired {
		return refuse(e, "slot %s is not declared", d.Slot)
	}
	if sl.Group != d.Group {
		leaveGroup(s, sl)
		sl.Group = d.Group
		s.share(&sl.Group)
		joinGroup(s, sl)
	}
	unindex(s, sl)
	sl.Spec = d.Spec
	s.shareSpecMaps(&sl.Spec)
	s.index.providerID[sl.ProviderID()] = sl.Name
	return nil
}

func slotRetired(s *State, e events.Event) error {
	d := e.Data.(events.SlotRetired)
	sl := s.Slots[d.Slot]
	if sl == nil || sl.Retired {
		return refuse(e, "slot %s is not declared", d.Slot)
	}
	leaveGroup(s, sl)
	sl.Retired = true
	unindex(s, sl)
	return nil
}

func slotDecommissioned(s *State, e events.Event) error {
	d := e.Data.(events.SlotDecommissioned)
	sl := s.Slots[d.Slot]
	if sl == nil || sl.Retired {
		return refuse(e, "slot %s is not declared", d.Slot)
	}
	sl.Decommissioned = &Mark{At: e.Time, By: d.By, Reason: d.Reason}
	return nil
}

func slotRecommissioned(s *State, e events.Event) error {
	d := e.Data.(events.SlotRecommissioned)
	sl := s.Slots[d.Slot]
	if sl == nil || sl.Retired {
		return refuse(e, "slot %s is not declared", d.Slot)
	}
	if sl.Decommissioned == nil {
		return refuse(e, "slot %s is not decommissioned", d.Slot)
	}
	sl.Decommissioned = nil
	return nil
}

// unindex drops the slot's providerID from the index if the entry is still
// the slot's own (two slots may have swapped providerIDs).
func unindex(s *State, sl *Slot) {
	if s.index.providerID[sl.ProviderID()] == sl.Name {
		delete(s.index.providerID, sl.ProviderID())
	}
}

func joinGroup(s *State, sl *Slot) {
	g := s.Groups[sl.Group]
	if g == nil {
		g = &Group{Name: sl.Group, Retired: true, Slots: []string{}}
		s.Groups[sl.Group] = g
	}
	if i, found := slices.BinarySearch(g.Slots, sl.Name); !found {
		g.Slots = slices.Insert(g.Slots, i, sl.Name)
	}
}

func leaveGroup(s *State, sl *Slot) {
	g := s.Groups[sl.Group]
	if g == nil {
		return
	}
	if i, found := slices.BinarySearch(g.Slots, sl.Name); found {
		g.Slots = slices.Delete(g.Slots, i, i+1)
	}
}

// --- claims ---------------------------------------------------------------

func claimCreated(s *State, e events.Event) error {
	d := e.Data.(events.ClaimCreated)
	sl := s.Slots[d.Slot]
	if sl == nil || sl.Retired {
		return refuse(e, "claim %s names slot %s, which is not declared", d.Claim, d.Slot)
	}
	if _, dup := s.Claims[d.Claim]; dup {
		return refuse(e, "claim %s exists", d.Claim)
	}
	deadline := d.DeadlineAt
	c := &Claim{
		Name: d.Claim, Slot: d.Slot, Group: d.Group, Phase: PhasePending, Attempt: d.Attempt,
		RequestedAt: d.RequestedAt, RequestedBy: d.RequestedBy, Request: d.Request,
		DeadlineAt: &deadline, Budget: d.Budget, MaxNodeProvisionTime: d.MaxNodeProvisionTime, TTL: d.TTL,
		TraceParent: e.TraceParent,
	}
	// One live claim per slot, by this rule alone: a claim created on a
	// slot that holds a live one (a hand-written or merged log; the store's
	// expectations keep the service's own writes from it) supersedes the
	// older in the views: it fails Superseded, with no forced shutdown,
	// since the newer claim owns the slot and its machine.
	older := liveClaimsOf(s, sl)
	s.Claims[c.Name] = c
	sl.Claims = append(sl.Claims, c.Name)
	step(c, e, d.Request.Call+signed(d.Request.Delta)+" by "+d.RequestedBy)
	for _, o := range older {
		supersede(o, c.Name, e)
	}
	stampDigest(s, sl, c)
	return nil
}

func liveClaimsOf(s *State, sl *Slot) []*Claim {
	var out []*Claim
	for _, name := range sl.Claims {
		if c := s.Claims[name]; c != nil && c.IsLive() {
			out = append(out, c)
		}
	}
	return out
}

// supersede ends c failed Superseded by the claim newer, at e's time; the
// step is recorded as a ClaimSuperseded so the timeline reads as such.
func supersede(c *Claim, newer string, e events.Event) {
	at := e.Time
	c.Phase, c.Reason, c.ForceShutdown = PhaseFailed, ReasonSuperseded, false
	c.FinishedAt, c.ShutdownPausedUntil = &at, nil
	addStep(c, Step{Seq: e.Seq, At: at, Type: events.TypeClaimSuperseded, Phase: PhaseFailed,
		Cause: "a second live claim on the slot", Detail: "superseded by " + newer})
}

// claimMove applies the phase change of a claim event, refusing what the
// phase table forbids.
func claimMove(to Phase) func(*State, events.Event) error {
	return func(s *State, e events.Event) error {
		ref := e.Data.Reference()
		c := s.Claims[ref.Claim]
		if c == nil {
			return refuse(e, "claim %s is not in the views", ref.Claim)
		}
		if !CanMove(c.Phase, to) {
			return refuse(e, "claim %s cannot move %s -> %s", c.Name, c.Phase.Normal(), to)
		}
		at := e.Time
		var detail string
		switch d := e.Data.(type) {
		case events.ClaimBooting:
			c.Attempt = d.Attempt
			c.StartupJob = d.StartupJob
			c.BootCommittedAt = &at
			detail = "attempt " + strconv.Itoa(d.Attempt) + ", startup Job " + d.StartupJob
		case events.ClaimReady:
			c.ReadyAt, c.Node = &at, d.Node
			// The boot is over: the deadline bounds the boot, never the machine.
			c.DeadlineAt = nil
			// The gate's read of the node is an input of the report: the node
			// it just passed is present, Ready, schedulable.
			if sl := s.Slots[c.Slot]; sl != nil {
				sl.Node.Name, sl.Node.Present, sl.Node.Ready, sl.Node.Unschedulable = d.Node, true, true, false
			}
			detail = "node " + d.Node
		case events.ClaimFailed:
			c.Reason, c.Message, c.ForceShutdown = d.Reason, d.Message, d.ForceShutdown
			detail = d.Reason
			if d.Message != "" {
				detail += ": " + d.Message
			}
		case events.ClaimCancelled:
			if !c.IsPending() {
				return refuse(e, "claim %s is %s: only a pending claim is cancelled (a committed boot is scaled down)", c.Name, c.Phase.Normal())
			}
			c.Reason = d.Reason
			detail = d.Reason
		case events.ClaimCompleted:
			c.Reason = d.Reason
			detail = d.Reason
		case events.ClaimSuperseded:
			c.Reason, c.ForceShutdown = ReasonSuperseded, false
			detail = "superseded by " + d.By
		}
		c.Phase = to
		if to.IsTerminal() {
			c.FinishedAt = &at
			c.ShutdownPausedUntil = nil
		}
		step(c, e, detail)
		stampDigest(s, s.Slots[c.Slot], c)
		return nil
	}
}

func scaleDownRequested(s *State, e events.Event) error {
	d := e.Data.(events.ScaleDownRequested)
	c := s.Claims[d.Claim]
	if c == nil {
		return refuse(e, "claim %s is not in the views", d.Claim)
	}
	if c.Phase != PhaseBooting && c.Phase != PhaseReady {
		return refuse(e, "claim %s is %s: only a booting or ready claim is scaled down (a pending one is cancelled)", c.Name, c.Phase.Normal())
	}
	if c.ScaleDown != nil {
		return refuse(e, "claim %s is already marked for scale-down", c.Name)
	}
	c.ScaleDown = &ScaleDownMark{At: e.Time, RequestedBy: d.RequestedBy, Request: d.Request, Reason: d.Reason}
	step(c, e, d.Request.Call+" by "+d.RequestedBy)
	return nil
}

func shutdownFired(s *State, e events.Event) error {
	d := e.Data.(events.ShutdownFired)
	sl := s.Slots[d.Slot]
	if sl == nil {
		return refuse(e, "slot %s is not in the views", d.Slot)
	}
	at := e.Time
	sl.LastShutdown = &Shutdown{At: at, Job: d.Job, Claim: d.Claim, Attempt: d.ShutdownAttempt, Force: d.Force, Cause: d.Cause}
	s.shareShutdown(sl, sl.LastShutdown)
	sl.ShutdownPausedUntil = nil
	if d.Claim == "" {
		return nil
	}
	c := s.Claims[d.Claim]
	if c == nil {
		return refuse(e, "claim %s is not in the views", d.Claim)
	}
	c.ShutdownAttempts = d.ShutdownAttempt
	c.StopJobs++
	c.LastShutdownAttemptAt = &at
	c.LastShutdownJob = d.Job
	c.ShutdownPausedUntil = nil
	step(c, e, "shutdown "+strconv.Itoa(d.ShutdownAttempt)+" of "+strconv.Itoa(ShutdownAttemptLimit)+", Job "+d.Job)
	return nil
}

func shutdownLimitReached(s *State, e events.Event) error {
	d := e.Data.(events.ShutdownAttemptLimitReached)
	c := s.Claims[d.Claim]
	if c == nil {
		return refuse(e, "claim %s is not in the views", d.Claim)
	}
	until := d.PausedUntil
	c.ShutdownPausedUntil = &until
	// The streak is spent; past the pause the count restarts.
	c.ShutdownAttempts = 0
	step(c, e, fmt.Sprintf("%d shutdowns did not land; paused until %s", d.Attempts, until.Format(time.RFC3339)))
	return nil
}

func machineObserved(on bool) func(*State, events.Event) error {
	return func(s *State, e events.Event) error {
		ref := e.Data.Reference()
		c := s.Claims[ref.Claim]
		if c == nil {
			return refuse(e, "claim %s is not in the views", ref.Claim)
		}
		if c.Phase != PhaseReady {
			return refuse(e, "claim %s is %s; the machine-gone clock runs on ready claims", c.Name, c.Phase.Normal())
		}
		if on {
			if c.MachineOffSince == nil {
				return refuse(e, "claim %s has no machine-off clock running", c.Name)
			}
			c.MachineOffSince = nil
			step(c, e, "machine back")
			return nil
		}
		if c.MachineOffSince != nil {
			return refuse(e, "claim %s: machine already observed off", c.Name)
		}
		at := e.Time
		c.MachineOffSince = &at
		step(c, e, "machine observed off")
		return nil
	}
}

func claimCollected(s *State, e events.Event) error {
	d := e.Data.(events.ClaimCollected)
	c := s.Claims[d.Claim]
	if c == nil {
		return refuse(e, "claim %s is not in the views", d.Claim)
	}
	if !c.Phase.IsTerminal() {
		return refuse(e, "claim %s is %s; only terminal claims are collected", c.Name, c.Phase.Normal())
	}
	delete(s.Claims, c.Name)
	if sl := s.Slots[c.Slot]; sl != nil {
		if i := slices.Index(sl.Claims, c.Name); i >= 0 {
			sl.Claims = slices.Delete(sl.Claims, i, i+1)
		}
	}
	return nil
}

// --- observation ----------------------------------------------------------

func nodeObserved(s *State, e events.Event) error {
	d := e.Data.(events.NodeObserved)
	sl := s.Slots[d.Slot]
	if sl == nil {
		return refuse(e, "slot %s is not in the views", d.Slot)
	}
	sl.Node = d.Node
	sl.NodeObservedAt = e.Time
	return nil
}

func hostJoined(s *State, e events.Event) error {
	d := e.Data.(events.HostJoined)
	if c := s.Claims[d.Claim]; c != nil {
		step(c, e, fmt.Sprintf("host %s joined (matched by %s)", d.Node, d.MatchedBy))
	}
	return nil
}

func hostJoinRefused(s *State, e events.Event) error {
	d := e.Data.(events.HostJoinRefused)
	sl := s.Slots[d.Slot]
	if sl == nil {
		return refuse(e, "slot %s is not in the views", d.Slot)
	}
	sl.LastJoinRefused = &Mark{At: e.Time, By: d.Node, Reason: d.Why}
	return nil
}

// --- helpers ---------------------------------------------------------------

func step(c *Claim, e events.Event, detail string) {
	addStep(c, Step{
		Seq: e.Seq, At: e.Time, Type: e.Data.EventType(), Phase: c.Phase.Normal(),
		Cause: e.Data.Reference().Cause, Detail: detail,
	})
}

// stampDigest writes c's digest on its slot if c is the slot's newest
// claim, so a late write from an older episode cannot rewrite the story.
func stampDigest(s *State, sl *Slot, c *Claim) {
	if sl == nil || len(sl.Claims) == 0 || sl.Claims[len(sl.Claims)-1] != c.Name {
		return
	}
	d := &Digest{
		Claim: c.Name, Phase: c.Phase.Normal(), Attempt: c.Attempt, Call: c.Request.Call, Group: c.Group,
		RequestedBy: c.RequestedBy, RequestedAt: c.RequestedAt, Reason: c.Reason,
		DeadlineAt: c.DeadlineAt, FinishedAt: c.FinishedAt,
		Booted: c.BootCommittedAt != nil, ReachedReady: c.ReadyAt != nil,
	}
	s.shareDigest(d)
	sl.LastClaim = d
}

func signed(n int) string {
	if n > 0 {
		return "(+" + strconv.Itoa(n) + ")"
	}
	if n < 0 {
		return "(" + strconv.Itoa(n) + ")"
	}
	return ""
}
