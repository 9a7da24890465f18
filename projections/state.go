package projections

import (
	"time"

	"github.com/claimstream/claimstream/events"
)

// Phase is a claim's phase (docs/design.md).
type Phase string

const (
	// PhaseNone is a claim whose first phase write has not landed; every
	// reader takes it as pending.
	PhaseNone      Phase = ""
	PhasePending   Phase = "pending"
	PhaseBooting   Phase = "booting"
	PhaseReady     Phase = "ready"
	PhaseFailed    Phase = "failed"
	PhaseCompleted Phase = "completed"
)

// IsPending: the only cancelable phase (the empty phase reads as pending).
func (p Phase) IsPending() bool { return p == PhaseNone || p == PhasePending }

// IsLive: the claim holds its slot and is capacity.
func (p Phase) IsLive() bool { return p.IsPending() || p == PhaseBooting || p == PhaseReady }

// InBootWindow: the range the deadline and the attempt bound apply to.
func (p Phase) InBootWindow() bool { return p.IsPending() || p == PhaseBooting }

// IsTerminal: failed or completed.
func (p Phase) IsTerminal() bool { return p == PhaseFailed || p == PhaseCompleted }

// Normal is the phase with the empty phase read as pending.
func (p Phase) Normal() Phase {
	if p == PhaseNone {
		return PhasePending
	}
	return p
}

// legalMoves is the phase table (docs/design.md): the only moves a claim
// makes. failed and completed are terminal.
var legalMoves = map[Phase][]Phase{
	PhasePending: {PhaseBooting, PhaseCompleted, PhaseFailed},
	PhaseBooting: {PhaseReady, PhaseFailed},
	PhaseReady:   {PhaseCompleted, PhaseFailed},
}

// CanMove reports whether the phase table allows from -> to.
func CanMove(from, to Phase) bool {
	for _, p := range legalMoves[from.Normal()] {
		if p == to {
			return true
		}
	}
	return false
}

// SlotPhase is the derived, reported phase of a slot (docs/design.md).
// It is a report: nothing decides from it.
type SlotPhase string

const (
	SlotOff            SlotPhase = "off"
	SlotPending        SlotPhase = "pending"
	SlotBooting        SlotPhase = "booting"
	SlotReady          SlotPhase = "ready"
	SlotDraining       SlotPhase = "draining"
	SlotDecommissioned SlotPhase = "decommissioned"
)

// Reasons a claim ends with.
const (
	ReasonDeadlineExceeded              = "DeadlineExceeded"
	ReasonStartupJobFailed              = "StartupJobFailed"
	ReasonJobTimeout                    = "JobTimeout"
	ReasonReadinessGateTimeout          = "ReadinessGateTimeout"
	ReasonMachineGone                   = "MachineGone"
	ReasonAttemptLimitReached           = "AttemptLimitReached"
	ReasonSuperseded                    = "Superseded"
	ReasonSlotDeleted                   = "SlotDeleted"
	ReasonCancelledByDecreaseTargetSize = "CancelledByDecreaseTargetSize"
	ReasonCancelledByDeleteNodes        = "CancelledByDeleteNodes"
	ReasonDeletedByHand                 = "DeletedByHand"
	ReasonDecommissioned                = "Decommissioned"
	ReasonNodeDeleted                   = "NodeDeleted"
	ReasonScaledDown                    = "ScaledDown"
	ReasonHostLost                      = "HostLost"
)

// State is every view, folded from the log by Evolve. Seq is the stream
// sequence of the last event it reflects; a decision made from a State is
// appended with the aggregates' sequences it read.
type State struct {
	Seq    uint64            `json:"seq"`
	Groups map[string]*Group `json:"groups"`
	Slots  map[string]*Slot  `json:"slots"`
	Claims map[string]*Claim `json:"claims"`
	Stats  Stats             `json:"stats"`
	// Leader is the replicas' leadership (nil before any LeaderElected).
	Leader *Leader `json:"leader,omitempty"`

	index index
}

// index holds lookups derived from the views; it is rebuilt, never stored.
type index struct {
	providerID map[string]string // providerID -> slot (declared, and the host a Job reported)
	node       map[string]string // reported node name -> slot (hosts.go)
	specMaps   events.SpecMaps   // the slots' shared labels and capacity (spec_maps.go)
	shared     sharedStrings     // the strings slots repeat (shared_strings.go)
}

// Reindex rebuilds the derived lookups (after decoding a snapshot).
func (s *State) Reindex() {
	s.index.providerID = make(map[string]string, len(s.Slots))
	s.index.node = map[string]string{}
	s.index.specMaps = events.SpecMaps{}
	s.index.shared = sharedStrings{}
	for name, sl := range s.Slots {
		if !sl.Retired {
			s.index.providerID[sl.ProviderID()] = name
		}
		s.shareSpecMaps(&sl.Spec)
		s.shareSlot(name, sl)
	}
	for _, sl := range s.Slots {
		indexHost(s, sl)
	}
}

// Stats counts what the fold met that it could not apply.
type Stats struct {
	Applied uint64 `json:"applied"`
	// Skipped: entries with no usable data (unknown type, bad data).
	Skipped uint64 `json:"skipped"`
	// Refused: well-formed events the model refuses (an illegal move, a
	// claim on an unknown slot). They stay in the log; the fold ignores them.
	Refused uint64 `json:"refused"`
}

// Group is the view of a node group.
type Group struct {
	Name    string           `json:"name"`
	Spec    events.GroupSpec `json:"spec"`
	Seq     uint64           `json:"seq"`
	Retired bool             `json:"retired,omitempty"`
	// Slots are the names of the group's declared slots, sorted.
	Slots        []string      `json:"slots"`
	LastDecision *ScaleDecided `json:"lastDecision,omitempty"`
	// LastRefusal and LastDemand are the group's last recorded refused
	// scale call and observed demand (evolve_demand.go).
	LastRefusal *Refusal        `json:"lastRefusal,omitempty"`
	LastDemand  *DemandObserved `json:"lastDemand,omitempty"`
	// Requests are the keys of the IncreaseSize calls accepted within
	// events.RequestRepeatWindow of the group's last one, oldest first: a
	// call with one of them is a retry (evolve_demand.go).
	Requests []AcceptedRequest `json:"requests,omitempty"`
}

// ScaleDecided is the group's last built-in scale decision.
type ScaleDecided struct {
	At     time.Time `json:"at"`
	Demand int       `json:"demand"`
	Target int       `json:"target"`
	Action string    `json:"action"`
	Reason string    `json:"reason"`
	// Nodes is the count of wanting claims the decision saw; Slots are the
	// slots it names (the idle nodes a hold watches, the nodes released).
	Nodes int      `json:"nodes"`
	Slots []string `json:"slots,omitempty"`
}

// Slot is the view of one slot: its config, its claims, what is observed
// of its machine, and the digest of its last claim.
type Slot struct {
	Name  string          `json:"name"`
	Group string          `json:"group"`
	Spec  events.SlotSpec `json:"spec"`
	// Seq is the last sequence of the slot aggregate: the expectation of
	// the next append to it.
	Seq     uint64 `json:"seq"`
	Retired bool   `json:"retired,omitempty"`
	// Decommissioned is set by an operator; no claim may be made on it.
	Decommissioned *Mark `json:"decommissioned,omitempty"`
	// Claims are the slot's claims still in the views, oldest first.
	Claims []string `json:"claims"`
	// Node is the last observation of the slot's Kubernetes Node.
	Node events.NodeState `json:"node"`
	// NodeObservedAt is when Node last changed.
	NodeObservedAt time.Time `json:"nodeObservedAt,omitzero"`
	// LastClaim is the digest of the newest claim (docs/design.md). It
	// survives the claim's collection.
	LastClaim *Digest `json:"lastClaim,omitempty"`
	// LastShutdown is the last shutdown fired for the slot by anyone.
	LastShutdown *Shutdown `json:"lastShutdown,omitempty"`
	// LastJoinRefused is the last host join this slot refused.
	LastJoinRefused *Mark `json:"lastJoinRefused,omitempty"`
	// ShutdownPausedUntil is the input law's pause after
	// ShutdownAttemptLimit shutdowns of an unclaimed machine that did not
	// land (UnclaimedShutdownPaused); the next ShutdownFired clears it.
	ShutdownPausedUntil *time.Time `json:"shutdownPausedUntil,omitempty"`
	// LastNodeDelete is the last NodeDeleteRequested: By is the Node,
	// Reason why it was deleted.
	LastNodeDelete *Mark `json:"lastNodeDelete,omitempty"`
	// Host is the machine the startup Job of the slot's newest claim
	// reported (HostExpected): its Node may have another name and
	// providerID than the slot's. Nil until a report, and again from the
	// slot's next claim on. NodeName and CurrentProviderID read it.
	Host *ExpectedHost `json:"host,omitempty"`
	// Power is the slot's last power fact (MachinePoweredOn/Off); nil when
	// none was ever written (the machine counts as off).
	Power *PowerFact `json:"power,omitempty"`
}

// Mark records who did something, when and why.
type Mark struct {
	At     time.Time `json:"at"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// Shutdown is a shutdown Job fired for a slot.
type Shutdown struct {
	At      time.Time `json:"at"`
	Job     string    `json:"job"`
	Claim   string    `json:"claim,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Force   bool      `json:"force"`
	Cause   string    `json:"cause"`
	// Observed: the cluster showed the Job (JobObserved); it is never
	// created again.
	Observed bool `json:"observed,omitempty"`
	// ObservedAt is when JobObserved was written: the Job existed then, so
	// it ended no later than its timeout after it.
	ObservedAt *time.Time `json:"observedAt,omitempty"`
	// Outcome is how the Job ended, once a JobObserved recorded it.
	Outcome *JobOutcome `json:"outcome,omitempty"`
}

// JobOutcome is how a lifecycle Job ended, as a JobObserved recorded it.
type JobOutcome struct {
	// Outcome is events.JobSucceeded or events.JobFailed.
	Outcome string `json:"outcome"`
	// FinishedAt is the Job's end (its status); zero when it gave none.
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Reason     string    `json:"reason,omitempty"`
	// RecordedAt is when the JobObserved was written: a Job claimstream
	// deletes goes its pool's ttlSecondsAfterFinished after this.
	RecordedAt time.Time `json:"recordedAt"`
}

// Digest is a slot's one-line story of its newest claim: who asked, when,
// how many attempts, why it ended.
type Digest struct {
	Claim        string     `json:"claim"`
	Phase        Phase      `json:"phase"`
	Attempt      int        `json:"attempt"`
	Call         string     `json:"call"`
	Group        string     `json:"group"`
	RequestedBy  string     `json:"requestedBy"`
	RequestedAt  time.Time  `json:"requestedAt"`
	Reason       string     `json:"reason,omitempty"`
	DeadlineAt   *time.Time `json:"deadlineAt,omitempty"`
	FinishedAt   *time.Time `json:"finishedAt,omitempty"`
	Booted       bool       `json:"booted"`
	ReachedReady bool       `json:"reachedReady"`
}

// Claim is the view of one claim: one request for one machine.
type Claim struct {
	Name        string         `json:"name"`
	Slot        string         `json:"slot"`
	Group       string         `json:"group"`
	Phase       Phase          `json:"phase"`
	Attempt     int            `json:"attempt"`
	Reason      string         `json:"reason,omitempty"`
	Message     string         `json:"message,omitempty"`
	RequestedAt time.Time      `json:"requestedAt"`
	RequestedBy string         `json:"requestedBy"`
	Request     events.Request `json:"request"`
	// DeadlineAt bounds the boot window; nil from ready on.
	DeadlineAt           *time.Time      `json:"deadlineAt,omitempty"`
	Budget               events.Duration `json:"budget"`
	MaxNodeProvisionTime events.Duration `json:"maxNodeProvisionTime,omitempty"`
	TTL                  events.Duration `json:"ttl"`
	// TraceParent is the W3C trace context of the call that created the
	// claim (its ClaimCreated event's traceparent): the later steps of the
	// claim join that trace.
	TraceParent string `json:"traceParent,omitempty"`

	StartupJob string `json:"startupJob,omitempty"`
	// StartupJobObserved: the cluster showed the startup Job (JobObserved);
	// it is never created again.
	StartupJobObserved bool `json:"startupJobObserved,omitempty"`
	// StartupJobOutcome is how the startup Job ended, once a JobObserved
	// recorded it.
	StartupJobOutcome *JobOutcome `json:"startupJobOutcome,omitempty"`
	BootCommittedAt   *time.Time  `json:"bootCommittedAt,omitempty"`
	ReadyAt           *time.Time  `json:"readyAt,omitempty"`
	Node              string      `json:"node,omitempty"`
	FinishedAt        *time.Time  `json:"finishedAt,omitempty"`
	// ForceShutdown: the claim failed and its machine must be powered off.
	ForceShutdown bool `json:"forceShutdown,omitempty"`

	// ScaleDown marks a booting or ready claim for scale-down: it no longer
	// wants its machine, but still owns its slot until the machine is off.
	ScaleDown *ScaleDownMark `json:"scaleDown,omitempty"`
	// ShutdownAttempts counts the shutdown Jobs fired for this claim's
	// scale-down (or force shutdown) in the current streak.
	ShutdownAttempts      int        `json:"shutdownAttempts,omitempty"`
	LastShutdownAttemptAt *time.Time `json:"lastShutdownAttemptAt,omitempty"`
	LastShutdownJob       string     `json:"lastShutdownJob,omitempty"`
	ShutdownPausedUntil   *time.Time `json:"shutdownPausedUntil,omitempty"`
	// StopJobs counts every shutdown Job ever fired for the claim: the n of
	// its next Job <claim>-stop-<n+1> (never reused across pauses).
	StopJobs int `json:"stopJobs,omitempty"`
	// InstanceDeleted is set when cluster-autoscaler deleted the instance
	// of this failed claim (FailedInstanceDeleted): it is no longer listed.
	InstanceDeleted *Mark `json:"instanceDeleted,omitempty"`
	// MachineOffSince is when a ready claim's machine was seen off.
	MachineOffSince *time.Time `json:"machineOffSince,omitempty"`

	// Expected is the host the claim expects to join (HostExpected), Joined
	// the Node matched to it (HostJoined), Drain the drain of its machine
	// before the shutdown (DrainStarted, DrainTimedOut).
	Expected *ExpectedHost `json:"expected,omitempty"`
	Joined   *HostJoin     `json:"joined,omitempty"`
	Drain    *Drain        `json:"drain,omitempty"`

	Timeline []Step `json:"timeline"`
}

// ScaleDownMark is the request that marked a claim for scale-down.
type ScaleDownMark struct {
	At          time.Time      `json:"at"`
	RequestedBy string         `json:"requestedBy"`
	Request     events.Request `json:"request"`
	Reason      string         `json:"reason,omitempty"`
}

// ExpectedHost is the host a booting claim expects (docs/design.md).
type ExpectedHost struct {
	At         time.Time `json:"at"`
	Node       string    `json:"node"`
	ProviderID string    `json:"providerID"`
	Address    string    `json:"address,omitempty"`
	InstanceID string    `json:"instanceID,omitempty"`
	DeadlineAt time.Time `json:"deadlineAt"`
}

// HostJoin is the Node matched to a claim, and how.
type HostJoin struct {
	At        time.Time `json:"at"`
	Node      string    `json:"node"`
	MatchedBy string    `json:"matchedBy"`
}

// Drain is the drain of a claim's machine before its shutdown.
type Drain struct {
	StartedAt  time.Time       `json:"startedAt"`
	Node       string          `json:"node"`
	Pods       []string        `json:"pods,omitempty"`
	Timeout    events.Duration `json:"timeout"`
	Policy     string          `json:"policy"`
	TimedOutAt *time.Time      `json:"timedOutAt,omitempty"`
	Remaining  []string        `json:"remaining,omitempty"`
}

// Step is one entry of a claim's timeline.
type Step struct {
	Seq   uint64      `json:"seq"`
	At    time.Time   `json:"at"`
	Type  events.Type `json:"type"`
	Phase Phase       `json:"phase"`
	Cause string      `json:"cause"`
	// Detail is the event's own numbers in words (Job name, reason).
	Detail string `json:"detail,omitempty"`
	// Repeats counts the later events of the same kind folded into this
	// step once the timeline held TimelineStepsPerKind of them; Seq, At and
	// Detail are then the newest one's.
	Repeats int `json:"repeats,omitempty"`
}

// NewState is the empty state: the fold's zero.
func NewState() *State {
	s := &State{Groups: map[string]*Group{}, Slots: map[string]*Slot{}, Claims: map[string]*Claim{}}
	s.Reindex()
	return s
}
