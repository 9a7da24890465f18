package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// Type names an event in the catalog. It is the last token of the NATS
// subject and, versioned, the CloudEvents type (see CEType).
type Type string

// The catalog. docs/events.md describes each one; schemas/events holds the
// JSON Schema of its data.
const (
	// Group aggregate (cs.group.<group>.<Type>).
	TypeGroupDeclared Type = "GroupDeclared"
	TypeGroupChanged  Type = "GroupChanged"
	TypeGroupRetired  Type = "GroupRetired"
	TypeScaleDecided  Type = "ScaleDecided"

	// Slot aggregate (cs.slot.<slot>.<Type>): the slot's config...
	TypeSlotDeclared       Type = "SlotDeclared"
	TypeSlotChanged        Type = "SlotChanged"
	TypeSlotRetired        Type = "SlotRetired"
	TypeSlotDecommissioned Type = "SlotDecommissioned"
	TypeSlotRecommissioned Type = "SlotRecommissioned"
	// ...its claims...
	TypeClaimCreated                Type = "ClaimCreated"
	TypeClaimBooting                Type = "ClaimBooting"
	TypeClaimReady                  Type = "ClaimReady"
	TypeClaimFailed                 Type = "ClaimFailed"
	TypeClaimCancelled              Type = "ClaimCancelled"
	TypeClaimCompleted              Type = "ClaimCompleted"
	TypeClaimSuperseded             Type = "ClaimSuperseded"
	TypeScaleDownRequested          Type = "ScaleDownRequested"
	TypeShutdownFired               Type = "ShutdownFired"
	TypeShutdownAttemptLimitReached Type = "ShutdownAttemptLimitReached"
	TypeMachineObservedOff          Type = "MachineObservedOff"
	TypeMachineObservedOn           Type = "MachineObservedOn"
	TypeClaimCollected              Type = "ClaimCollected"
	// ...and what is observed of its machine and host.
	TypeNodeObserved    Type = "NodeObserved"
	TypeHostJoined      Type = "HostJoined"
	TypeHostJoinRefused Type = "HostJoinRefused"
	// Elastic hosts (docs/design.md): the host a booting claim expects, and the
	// drain of a machine before its shutdown.
	TypeHostExpected  Type = "HostExpected"
	TypeDrainStarted  Type = "DrainStarted"
	TypeDrainTimedOut Type = "DrainTimedOut"
	// Side effects recorded before they are carried out, and the pauses and
	// ends that have no claim move of their own.
	TypeUnclaimedShutdownPaused Type = "UnclaimedShutdownPaused"
	TypeNodeDeleteRequested     Type = "NodeDeleteRequested"
	TypeFailedInstanceDeleted   Type = "FailedInstanceDeleted"
	// What the cluster showed of a lifecycle Job recorded above.
	TypeJobObserved Type = "JobObserved"
)

// Data is the payload of one event. Every payload embeds Ref, so every event
// names its claim, slot, group, attempt and cause.
type Data interface {
	EventType() Type
	Reference() Ref
}

// Ref is what every event names. Claim and Attempt are empty on events that
// are not about a claim (config, observation); Slot is empty on group events.
type Ref struct {
	Claim   string `json:"claim,omitempty"`
	Slot    string `json:"slot,omitempty"`
	Group   string `json:"group"`
	Attempt int    `json:"attempt,omitempty"`
	// Cause says why the event was written, in words an operator reads in an
	// audit: "IncreaseSize(+2) by cluster-autoscaler", "deadline passed".
	Cause string `json:"cause"`
}

// Reference returns the Ref itself; embedding Ref gives every payload the
// Data.Reference method.
func (r Ref) Reference() Ref { return r }

// Duration is a time.Duration that reads and writes as a Go duration string
// ("5m", "90s") in JSON, the way operators write it in the pool file.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string ("4m30s").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"5m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// Taint is a Kubernetes node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Lifecycle holds a group's per-attempt timeouts. A zero field means the
// default of docs/design.md (see projections.LifecycleOf).
type Lifecycle struct {
	StartupJobTimeout Duration `json:"startupJobTimeout,omitempty"`
	RegistrationWait  Duration `json:"registrationWait,omitempty"`
	ReadinessGate     Duration `json:"readinessGate,omitempty"`
}

// Pricing is what a machine of the group costs, for the provider's pricing RPCs.
type Pricing struct {
	NodePerHour float64 `json:"nodePerHour,omitempty"`
	PodPerHour  float64 `json:"podPerHour,omitempty"`
}

// NodeTemplate describes the Node a machine of the group registers as. It
// drives TemplateNodeInfo and what a joining host is given.
type NodeTemplate struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Taints      []Taint           `json:"taints,omitempty"`
	// Capacity and Allocatable are Kubernetes resource quantities by name
	// ("cpu": "8", "memory": "32Gi", "pods": "110").
	Capacity    map[string]string `json:"capacity,omitempty"`
	Allocatable map[string]string `json:"allocatable,omitempty"`
	Pricing     *Pricing          `json:"pricing,omitempty"`
}

// AutoscalingOptions are the group's overrides of cluster-autoscaler's
// per-group options (NodeGroupGetOptions). A nil field is not overridden:
// the provider echoes the caller's defaults for it.
type AutoscalingOptions struct {
	ScaleDownUtilizationThreshold    *float64  `json:"scaleDownUtilizationThreshold,omitempty"`
	ScaleDownGpuUtilizationThreshold *float64  `json:"scaleDownGpuUtilizationThreshold,omitempty"`
	ScaleDownUnneededTime            *Duration `json:"scaleDownUnneededTime,omitempty"`
	ScaleDownUnreadyTime             *Duration `json:"scaleDownUnreadyTime,omitempty"`
	ZeroOrMaxNodeScaling             *bool     `json:"zeroOrMaxNodeScaling,omitempty"`
	IgnoreDaemonSetsUtilization      *bool     `json:"ignoreDaemonSetsUtilization,omitempty"`
}

// BuiltinScaler configures a group whose scaler is "builtin" (docs/design.md).
type BuiltinScaler struct {
	PodsPerNode int      `json:"podsPerNode,omitempty"`
	MaxNodes    int      `json:"maxNodes,omitempty"`
	Hold        Duration `json:"hold,omitempty"`
}

// Scaler names who decides a group's size.
const (
	ScalerClusterAutoscaler = "cluster-autoscaler"
	ScalerBuiltin           = "builtin"
)

// GroupSpec is the declared configuration of a node group.
type GroupSpec struct {
	MinSize int `json:"minSize"`
	// MaxSize caps the live claims of the group; 0 means the number of slots.
	MaxSize              int                 `json:"maxSize,omitempty"`
	MaxNodeProvisionTime Duration            `json:"maxNodeProvisionTime,omitempty"`
	ReadinessTaints      []Taint             `json:"readinessTaints"`
	Scaler               string              `json:"scaler"`
	ClaimTTL             Duration            `json:"claimTTL,omitempty"`
	Lifecycle            Lifecycle           `json:"lifecycle"`
	Template             *NodeTemplate       `json:"template,omitempty"`
	Autoscaling          *AutoscalingOptions `json:"autoscaling,omitempty"`
	Builtin              *BuiltinScaler      `json:"builtin,omitempty"`
	GPULabel             string              `json:"gpuLabel,omitempty"`
	// DrainTimeout bounds the drain of a machine before its shutdown
	// (default 10m); OnDrainTimeout is what happens past it: wait (the
	// default), evict or force (see DrainWait, DrainEvict, DrainForce).
	DrainTimeout   Duration `json:"drainTimeout,omitempty"`
	OnDrainTimeout string   `json:"onDrainTimeout,omitempty"`
	// Cost prices a machine of the group (power.go, docs/cost.md).
	Cost *Cost `json:"cost,omitempty"`
}

// What a drain does past its group's drainTimeout.
const (
	// DrainWait stops evicting and waits for the remaining pods to end.
	DrainWait = "wait"
	// DrainEvict keeps retrying evictions (PodDisruptionBudgets still rule).
	DrainEvict = "evict"
	// DrainForce deletes the remaining pods and goes on to the shutdown.
	DrainForce = "force"
)

// JobSpec is a lifecycle Job: a pod spec, kept as the JSON of a
// Kubernetes core/v1 PodSpec so this package stays free of Kubernetes
// types, or a power driver's action (PodSpec null, Power set).
type JobSpec struct {
	PodSpec json.RawMessage `json:"podSpec"`
	// Power: the Job runs `claimstream power on` (startup) or `off`
	// (shutdown) from the claimstream image with this driver.
	Power *Power `json:"power,omitempty"`
	// TTLSecondsAfterFinished: claimstream deletes the finished Job this
	// long after its outcome is in the log (JobObserved); nil keeps it.
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// The power drivers a pool file may name (docs/power.md).
const (
	PowerWoL     = "wol"
	PowerIPMI    = "ipmi"
	PowerRedfish = "redfish"
	PowerLibvirt = "libvirt"
	PowerProxmox = "proxmox"
	// PowerExec is the pod specs as written.
	PowerExec = "exec"
)

// Power is how a slot's machine is switched by a power driver: what the
// lifecycle Job passes to `claimstream power`. Credentials are never
// here: CredentialsSecret names the Secret (in the Jobs' namespace) the
// Job mounts.
type Power struct {
	Driver string `json:"driver"`
	// Address: the BMC (ipmi host[:port], redfish https://host[:port]),
	// the libvirt daemon (socket path or host:port), the Proxmox API
	// (https://host:8006).
	Address           string `json:"address,omitempty"`
	CredentialsSecret string `json:"credentialsSecret,omitempty"`
	// Hard: off cuts the power instead of asking the operating system.
	Hard bool `json:"hard,omitempty"`
	// wol
	MAC       string `json:"mac,omitempty"`
	Broadcast string `json:"broadcast,omitempty"`
	Probe     string `json:"probe,omitempty"`
	// ipmi
	CipherSuite int `json:"cipherSuite,omitempty"`
	// redfish
	System  string `json:"system,omitempty"`
	Session bool   `json:"session,omitempty"`
	// redfish, proxmox: the SHA-256 fingerprint of the controller's
	// certificate (else its CA, key ca.crt of the Secret, else the
	// image's roots).
	Fingerprint string `json:"fingerprint,omitempty"`
	// libvirt
	Domain string `json:"domain,omitempty"`
	URI    string `json:"uri,omitempty"`
	// proxmox: a guest (Node, VMID, Kind qemu or lxc) or a node (Node
	// alone, woken by the cluster member at Address).
	Node    string `json:"node,omitempty"`
	VMID    int    `json:"vmid,omitempty"`
	Kind    string `json:"kind,omitempty"`
	TokenID string `json:"tokenID,omitempty"`
}

// SlotSpec is the declared configuration of a slot: one machine, named like
// its Kubernetes Node.
type SlotSpec struct {
	ProviderID string            `json:"providerID"`
	Address    string            `json:"address,omitempty"`
	Startup    *JobSpec          `json:"startup,omitempty"`
	Shutdown   *JobSpec          `json:"shutdown,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Taints     []Taint           `json:"taints,omitempty"`
	Capacity   map[string]string `json:"capacity,omitempty"`
	// Cost overrides the group's prices and power draw for this machine.
	Cost *Cost `json:"cost,omitempty"`
}

// DefaultProviderID is the providerID of a slot that declares none:
// homelab://<slot>, the instance id cluster-autoscaler matches Nodes by.
func DefaultProviderID(slot string) string { return "homelab://" + slot }

// Request is the structured attribution of a claim or a scale-down: which
// call asked, with what arguments.
type Request struct {
	// Call is the entry point: IncreaseSize, DecreaseTargetSize, DeleteNodes,
	// Manual, DeleteClaim, Decommission, Decide (built-in scaler).
	Call  string   `json:"call"`
	Delta int      `json:"delta,omitempty"`
	Group string   `json:"group"`
	Nodes []string `json:"nodes,omitempty"`
	// Key identifies the call among its retries (RequestRepeatWindow):
	// "trace <trace id> <group> +<delta>" when the caller sent a W3C
	// traceparent, else "caller <requester> <group> +<delta> #<nonce>",
	// the nonce shared by a call and its retries (provider/requestkey.go).
	Key string `json:"key,omitempty"`
}

// RequestRepeatWindow: an IncreaseSize whose request key is that of one
// accepted for the group within this window is a retry of it (its answer
// was lost, or said the outcome is unknown): it writes nothing and
// succeeds. It covers a client's retry after its own timeout
// (cluster-autoscaler waits 5s for an answer) and is no longer than
// cluster-autoscaler's scan interval (10s), so a call of its next loop,
// decided on the new target size, is a new request. The provider also
// keeps a call without a trace as a retry candidate only this long after
// the call before it ended.
const RequestRepeatWindow = 10 * time.Second

// Calls that create or end claims.
const (
	CallIncreaseSize       = "IncreaseSize"
	CallDecreaseTargetSize = "DecreaseTargetSize"
	CallDeleteNodes        = "DeleteNodes"
	CallManual             = "Manual"
	CallDeleteClaim        = "DeleteClaim"
	CallDecommission       = "Decommission"
	CallDecide             = "Decide"
)

// NodeState is one observation of a slot's Kubernetes Node.
type NodeState struct {
	Name          string  `json:"name,omitempty"`
	ProviderID    string  `json:"providerID,omitempty"`
	Present       bool    `json:"present"`
	Ready         bool    `json:"ready"`
	Unschedulable bool    `json:"unschedulable"`
	Taints        []Taint `json:"taints,omitempty"`
	// ToBeDeleted is cluster-autoscaler's ToBeDeletedByClusterAutoscaler taint.
	ToBeDeleted bool   `json:"toBeDeleted"`
	Address     string `json:"address,omitempty"`
}

// --- group aggregate -------------------------------------------------------

// GroupDeclared: a group appeared in the pool config.
type GroupDeclared struct {
	Ref
	Spec GroupSpec `json:"spec"`
}

// GroupChanged: a group's declared spec changed.
type GroupChanged struct {
	Ref
	Spec GroupSpec `json:"spec"`
}

// GroupRetired: a group left the pool config.
type GroupRetired struct {
	Ref
}

// ScaleDecided: the built-in scaler changed something (docs/design.md).
type ScaleDecided struct {
	Ref
	Demand int      `json:"demand"`
	Target int      `json:"target"`
	Nodes  int      `json:"nodes"`
	Action string   `json:"action"`
	Reason string   `json:"reason"`
	Slots  []string `json:"slots,omitempty"`
}

// --- slot aggregate: config ------------------------------------------------

// SlotDeclared: a slot appeared in the pool config.
type SlotDeclared struct {
	Ref
	Spec SlotSpec `json:"spec"`
}

// SlotChanged: a slot's declared spec (or its group) changed.
type SlotChanged struct {
	Ref
	Spec SlotSpec `json:"spec"`
}

// SlotRetired: a slot left the pool config.
type SlotRetired struct {
	Ref
}

// SlotDecommissioned: an operator took the slot out of service.
type SlotDecommissioned struct {
	Ref
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

// SlotRecommissioned: an operator put a decommissioned slot back.
type SlotRecommissioned struct {
	Ref
	By string `json:"by"`
}

// --- slot aggregate: claims ------------------------------------------------

// ClaimCreated: one request for one machine. The claim is pending.
type ClaimCreated struct {
	Ref
	RequestedAt time.Time `json:"requestedAt"`
	RequestedBy string    `json:"requestedBy"`
	Request     Request   `json:"request"`
	DeadlineAt  time.Time `json:"deadlineAt"`
	// Budget and MaxNodeProvisionTime are the numbers in force when the
	// claim was made; DeadlineAt = RequestedAt + max(Budget, MaxNodeProvisionTime).
	Budget               Duration `json:"budget"`
	MaxNodeProvisionTime Duration `json:"maxNodeProvisionTime,omitempty"`
	TTL                  Duration `json:"ttl"`
}

// ClaimBooting: pending -> booting. The startup Job is created after this
// event is acknowledged; Attempt is the machine this claim is buying.
type ClaimBooting struct {
	Ref
	StartupJob string `json:"startupJob"`
}

// ClaimReady: booting -> ready. The deadline is cleared.
type ClaimReady struct {
	Ref
	Node string `json:"node"`
}

// ClaimFailed: -> failed (terminal). ForceShutdown says the machine must be
// powered off (an overdue or broken boot must not join and serve).
type ClaimFailed struct {
	Ref
	Reason        string `json:"reason"`
	Message       string `json:"message,omitempty"`
	ForceShutdown bool   `json:"forceShutdown"`
}

// ClaimCancelled: a pending claim is cancelled; it ends completed.
type ClaimCancelled struct {
	Ref
	Reason      string   `json:"reason"`
	RequestedBy string   `json:"requestedBy,omitempty"`
	Request     *Request `json:"request,omitempty"`
}

// ClaimCompleted: -> completed (terminal), the machine it asked for is off
// or being powered off.
type ClaimCompleted struct {
	Ref
	Reason string `json:"reason"`
}

// ClaimSuperseded: a second live claim on a slot is failed in favour of the
// newest one. Nothing writes it any more (the fold supersedes the older
// claim when the newer one's ClaimCreated lands); a log that holds one is
// still read.
type ClaimSuperseded struct {
	Ref
	By string `json:"by"`
}

// ScaleDownRequested marks a booting or ready claim for scale-down. It stops
// wanting a machine on this write; its shutdown follows.
type ScaleDownRequested struct {
	Ref
	RequestedBy string  `json:"requestedBy"`
	Request     Request `json:"request"`
	Reason      string  `json:"reason,omitempty"`
}

// ShutdownFired: a shutdown Job was created for the slot's machine. Claim is
// empty when the input law shuts down a machine nobody claims.
type ShutdownFired struct {
	Ref
	Job string `json:"job"`
	// ShutdownAttempt counts shutdown Jobs of a scale-down, 1..N.
	ShutdownAttempt int  `json:"shutdownAttempt,omitempty"`
	Force           bool `json:"force"`
}

// ShutdownAttemptLimitReached: a scale-down fired its bound of shutdown Jobs
// and the machine is still up; firing pauses until PausedUntil.
type ShutdownAttemptLimitReached struct {
	Ref
	Attempts    int       `json:"attempts"`
	PausedUntil time.Time `json:"pausedUntil"`
}

// MachineObservedOff: a ready claim's machine was seen off; the clock of the
// machine-gone bound starts at this event's time.
type MachineObservedOff struct {
	Ref
}

// MachineObservedOn: the machine came back; the machine-gone clock stops.
type MachineObservedOn struct {
	Ref
}

// ClaimCollected: a terminal claim passed its TTL and leaves the live views.
// Its history stays in the log.
type ClaimCollected struct {
	Ref
}

// NodeObserved: the slot's Node changed (written on change only).
type NodeObserved struct {
	Ref
	Node NodeState `json:"node"`
}

// HostJoined: a registering Node was matched to the claim that expected it.
type HostJoined struct {
	Ref
	Node      string `json:"node"`
	MatchedBy string `json:"matchedBy"`
}

// HostJoinRefused: a Node joined that nothing expected; it was cordoned and
// tainted.
type HostJoinRefused struct {
	Ref
	Node string `json:"node"`
	Why  string `json:"why"`
}

// HostExpected: a booting claim records the host it expects to join: its
// Node name, providerID, address, the provider's instance id when the
// startup Job reported one, and the deadline it must join by.
type HostExpected struct {
	Ref
	Node       string    `json:"node"`
	ProviderID string    `json:"providerID"`
	Address    string    `json:"address,omitempty"`
	InstanceID string    `json:"instanceID,omitempty"`
	DeadlineAt time.Time `json:"deadlineAt"`
}

// DrainStarted: the machine of a claim marked for scale-down is cordoned
// and drained through the eviction API before its shutdown. Timeout and
// Policy are the group's drainTimeout and onDrainTimeout in force.
type DrainStarted struct {
	Ref
	Node    string   `json:"node"`
	Pods    []string `json:"pods,omitempty"`
	Timeout Duration `json:"timeout"`
	Policy  string   `json:"policy"`
}

// DrainTimedOut: the drain passed its timeout with pods left; Policy says
// what happens now.
type DrainTimedOut struct {
	Ref
	Node      string   `json:"node"`
	Policy    string   `json:"policy"`
	Remaining []string `json:"remaining,omitempty"`
}

// UnclaimedShutdownPaused: the input law fired its bound of shutdown Jobs at
// a machine nobody claims and it is still up; firing pauses until
// PausedUntil. The claimless twin of ShutdownAttemptLimitReached.
type UnclaimedShutdownPaused struct {
	Ref
	Attempts    int       `json:"attempts"`
	PausedUntil time.Time `json:"pausedUntil"`
}

// NodeDeleteRequested: the Node object of a slot is about to be deleted
// (the NotReady Node of a powered-off machine). Written before the delete.
type NodeDeleteRequested struct {
	Ref
	Node string `json:"node"`
	Why  string `json:"why"`
}

// FailedInstanceDeleted: cluster-autoscaler deleted the instance of a failed
// claim (DeleteNodes on an instance reported with errorInfo); the instance
// is no longer listed. Ref names the failed claim.
type FailedInstanceDeleted struct {
	Ref
	RequestedBy string  `json:"requestedBy"`
	Request     Request `json:"request"`
}

// JobObserved: the cluster showed a lifecycle Job a ClaimBooting or
// ShutdownFired recorded: the API server answered its create (Created), or
// it was there already (a create that found it, the informer's cache, a
// read). A Job observed once is never created again for its attempt,
// whatever becomes of it (removed by its TTL or by hand). Written again,
// once, with Outcome when the Job is seen finished (or once, with both,
// when it is first seen finished): claimstream deletes a Job it made only
// after that. Ref names the slot, and the claim unless an input-law
// shutdown.
type JobObserved struct {
	Ref
	Job string `json:"job"`
	// Operation is "startup" or "shutdown".
	Operation string `json:"operation"`
	Created   bool   `json:"created"`
	// Outcome is how the Job ended (JobSucceeded, JobFailed); empty while
	// it runs.
	Outcome string `json:"outcome,omitempty"`
	// FinishedAt is the end the Job's status gives, with an Outcome.
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Reason is Kubernetes' reason for a failed Job (DeadlineExceeded,
	// BackoffLimitExceeded).
	Reason string `json:"reason,omitempty"`
	// Message is what a failed Job said of its failure: its pod's
	// termination message, at most MaxJobMessage bytes.
	Message string `json:"message,omitempty"`
}

// MaxJobMessage bounds a failed Job's message in the log.
const MaxJobMessage = 1024

// A lifecycle Job's outcome (JobObserved.Outcome).
const (
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

func (GroupDeclared) EventType() Type               { return TypeGroupDeclared }
func (GroupChanged) EventType() Type                { return TypeGroupChanged }
func (GroupRetired) EventType() Type                { return TypeGroupRetired }
func (ScaleDecided) EventType() Type                { return TypeScaleDecided }
func (SlotDeclared) EventType() Type                { return TypeSlotDeclared }
func (SlotChanged) EventType() Type                 { return TypeSlotChanged }
func (SlotRetired) EventType() Type                 { return TypeSlotRetired }
func (SlotDecommissioned) EventType() Type          { return TypeSlotDecommissioned }
func (SlotRecommissioned) EventType() Type          { return TypeSlotRecommissioned }
func (ClaimCreated) EventType() Type                { return TypeClaimCreated }
func (ClaimBooting) EventType() Type                { return TypeClaimBooting }
func (ClaimReady) EventType() Type                  { return TypeClaimReady }
func (ClaimFailed) EventType() Type                 { return TypeClaimFailed }
func (ClaimCancelled) EventType() Type              { return TypeClaimCancelled }
func (ClaimCompleted) EventType() Type              { return TypeClaimCompleted }
func (ClaimSuperseded) EventType() Type             { return TypeClaimSuperseded }
func (ScaleDownRequested) EventType() Type          { return TypeScaleDownRequested }
func (ShutdownFired) EventType() Type               { return TypeShutdownFired }
func (ShutdownAttemptLimitReached) EventType() Type { return TypeShutdownAttemptLimitReached }
func (MachineObservedOff) EventType() Type          { return TypeMachineObservedOff }
func (MachineObservedOn) EventType() Type           { return TypeMachineObservedOn }
func (ClaimCollected) EventType() Type              { return TypeClaimCollected }
func (NodeObserved) EventType() Type                { return TypeNodeObserved }
func (HostJoined) EventType() Type                  { return TypeHostJoined }
func (HostJoinRefused) EventType() Type             { return TypeHostJoinRefused }
func (HostExpected) EventType() Type                { return TypeHostExpected }
func (DrainStarted) EventType() Type                { return TypeDrainStarted }
func (DrainTimedOut) EventType() Type               { return TypeDrainTimedOut }
func (UnclaimedShutdownPaused) EventType() Type     { return TypeUnclaimedShutdownPaused }
func (NodeDeleteRequested) EventType() Type         { return TypeNodeDeleteRequested }
func (FailedInstanceDeleted) EventType() Type       { return TypeFailedInstanceDeleted }
func (JobObserved) EventType() Type                 { return TypeJobObserved }

// catalog maps every type to its aggregate kind and a constructor of its data.
var catalog = map[Type]struct {
	kind AggregateKind
	new  func() Data
}{
	TypeGroupDeclared:               {KindGroup, func() Data { return &GroupDeclared{} }},
	TypeGroupChanged:                {KindGroup, func() Data { return &GroupChanged{} }},
	TypeGroupRetired:                {KindGroup, func() Data { return &GroupRetired{} }},
	TypeScaleDecided:                {KindGroup, func() Data { return &ScaleDecided{} }},
	TypeScaleRequested:              {KindGroup, func() Data { return &ScaleRequested{} }},
	TypeDemandObserved:              {KindGroup, func() Data { return &DemandObserved{} }},
	TypeSlotDeclared:                {KindSlot, func() Data { return &SlotDeclared{} }},
	TypeSlotChanged:                 {KindSlot, func() Data { return &SlotChanged{} }},
	TypeSlotRetired:                 {KindSlot, func() Data { return &SlotRetired{} }},
	TypeSlotDecommissioned:          {KindSlot, func() Data { return &SlotDecommissioned{} }},
	TypeSlotRecommissioned:          {KindSlot, func() Data { return &SlotRecommissioned{} }},
	TypeClaimCreated:                {KindSlot, func() Data { return &ClaimCreated{} }},
	TypeClaimBooting:                {KindSlot, func() Data { return &ClaimBooting{} }},
	TypeClaimReady:                  {KindSlot, func() Data { return &ClaimReady{} }},
	TypeClaimFailed:                 {KindSlot, func() Data { return &ClaimFailed{} }},
	TypeClaimCancelled:              {KindSlot, func() Data { return &ClaimCancelled{} }},
	TypeClaimCompleted:              {KindSlot, func() Data { return &ClaimCompleted{} }},
	TypeClaimSuperseded:             {KindSlot, func() Data { return &ClaimSuperseded{} }},
	TypeScaleDownRequested:          {KindSlot, func() Data { return &ScaleDownRequested{} }},
	TypeShutdownFired:               {KindSlot, func() Data { return &ShutdownFired{} }},
	TypeShutdownAttemptLimitReached: {KindSlot, func() Data { return &ShutdownAttemptLimitReached{} }},
	TypeMachineObservedOff:          {KindSlot, func() Data { return &MachineObservedOff{} }},
	TypeMachineObservedOn:           {KindSlot, func() Data { return &MachineObservedOn{} }},
	TypeClaimCollected:              {KindSlot, func() Data { return &ClaimCollected{} }},
	TypeNodeObserved:                {KindSlot, func() Data { return &NodeObserved{} }},
	TypeHostJoined:                  {KindSlot, func() Data { return &HostJoined{} }},
	TypeHostJoinRefused:             {KindSlot, func() Data { return &HostJoinRefused{} }},
	TypeHostExpected:                {KindSlot, func() Data { return &HostExpected{} }},
	TypeDrainStarted:                {KindSlot, func() Data { return &DrainStarted{} }},
	TypeDrainTimedOut:               {KindSlot, func() Data { return &DrainTimedOut{} }},
	TypeUnclaimedShutdownPaused:     {KindSlot, func() Data { return &UnclaimedShutdownPaused{} }},
	TypeNodeDeleteRequested:         {KindSlot, func() Data { return &NodeDeleteRequested{} }},
	TypeFailedInstanceDeleted:       {KindSlot, func() Data { return &FailedInstanceDeleted{} }},
	TypeJobObserved:                 {KindSlot, func() Data { return &JobObserved{} }},
	TypeLeaderElected:               {KindLeadership, func() Data { return &LeaderElected{} }},
	TypeSizeIncreased:               {KindGroup, func() Data { return &SizeIncreased{} }},
	TypeSizeDecreased:               {KindGroup, func() Data { return &SizeDecreased{} }},
	TypeMachinePoweredOn:            {KindSlot, func() Data { return &MachinePoweredOn{} }},
	TypeMachinePoweredOff:           {KindSlot, func() Data { return &MachinePoweredOff{} }},
}

// Types lists the catalog in a stable order.
func Types() []Type {
	out := make([]Type, 0, len(catalog))
	for t := range catalog {
		out = append(out, t)
	}
	sortTypes(out)
	return out
}

// Known reports whether t is in the catalog.
func Known(t Type) bool { _, ok := catalog[t]; return ok }

// KindOf returns the aggregate kind events of type t belong to.
func KindOf(t Type) (AggregateKind, bool) {
	c, ok := catalog[t]
	return c.kind, ok
}

// AggregateOf returns the aggregate an event's data belongs to.
func AggregateOf(d Data) Aggregate {
	kind, _ := KindOf(d.EventType())
	r := d.Reference()
	switch kind {
	case KindGroup:
		return GroupAggregate(r.Group)
	case KindLeadership:
		return Leadership()
	}
	return SlotAggregate(r.Slot)
}

// UnknownTypeError is returned when decoding a type the catalog lacks.
type UnknownTypeError struct{ Type string }

func (e *UnknownTypeError) Error() string { return fmt.Sprintf("unknown event type %q", e.Type) }

// DecodeData decodes JSON data of type t. Unknown fields are accepted so that
// an older reader can read a newer writer's additive change.
func DecodeData(t Type, b []byte) (Data, error) {
	c, ok := catalog[t]
	if !ok {
		return nil, &UnknownTypeError{Type: string(t)}
	}
	d := c.new()
	if err := unmarshalData(b, d); err != nil {
		return nil, fmt.Errorf("decode %s data: %w", t, err)
	}
	// Return the value, not the pointer, so consumers switch on value types.
	return deref(d), nil
}
