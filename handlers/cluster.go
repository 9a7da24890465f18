package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/scale"
)

// Cluster is what the reactors act through: reads come from informer
// caches (never from the projection), writes go through the API. The
// client-go implementation is handlers/kube; handlers/sim runs the same
// implementation over client-go's fake clientset with simulated machines.
type Cluster interface {
	// CreateJob creates a lifecycle Job; created is false when the Job was
	// there already (AlreadyExists is success: Job names are
	// deterministic, so a second create is the same Job). Either way the
	// next Job read sees it, whether or not the informer has.
	CreateJob(ctx context.Context, req JobRequest) (created bool, err error)
	// Job reads a lifecycle Job by name (the informer's cache, or the
	// adapter's own create the cache has not delivered yet).
	Job(name string) (JobState, bool)
	// GetJob reads a lifecycle Job from the API server itself (a quorum
	// list of the one name): the last word before a Job the log recorded,
	// and the cache lacks, is created.
	GetJob(ctx context.Context, name string) (JobState, bool, error)
	// SlotJobs lists the lifecycle Jobs of a slot in the cache (its
	// AnnotationSlot, or LabelSlot).
	SlotJobs(slot string) []JobState
	// DeleteJob deletes a finished lifecycle Job and its pods; NotFound is
	// success. Only a Job whose outcome the log holds is deleted
	// (JobReaper).
	DeleteJob(ctx context.Context, name string) error
	// Node reads a Kubernetes Node by name (a slot's Node is named
	// projections.Slot.NodeName: the slot's name, or the host its startup
	// Job reported).
	Node(name string) (NodeView, bool)
	// GetNode reads a Node from the API server itself (a quorum list of
	// the one name): the last word before a claim fails for a Node the
	// cache does not show.
	GetNode(ctx context.Context, name string) (NodeView, bool, error)
	// Cordon and Uncordon set spec.unschedulable; a missing Node is no error.
	Cordon(ctx context.Context, node string) error
	Uncordon(ctx context.Context, node string) error
	// DeleteNode deletes a Node object; NotFound is success.
	DeleteNode(ctx context.Context, node string) error
	// ApplySlotConfig makes sure the Node carries the slot's declared labels
	// and taints (a re-registered kubelet starts without them).
	ApplySlotConfig(ctx context.Context, node string, labels map[string]string, taints []events.Taint) error
	// HasSynced reports whether the caches have been filled once.
	HasSynced() bool
	// Changed returns a channel closed at the next change the caches see.
	Changed() <-chan struct{}

	// --- elastic hosts and the built-in scaler (docs/design.md) ---

	// Nodes lists every Node in the cache (the refusal of a host that
	// joined under a name no slot has).
	Nodes() []NodeView
	// AddNodeTaint adds a taint unless the Node carries one with its key
	// and effect; RemoveNodeTaint drops every taint with the key. A missing
	// Node is no error.
	AddNodeTaint(ctx context.Context, node string, t events.Taint) error
	RemoveNodeTaint(ctx context.Context, node, key string) error
	// ListPodsOnNode reads the pods bound to a Node from the API.
	ListPodsOnNode(ctx context.Context, node string) ([]PodView, error)
	// Evict asks the eviction API (policy/v1) to evict a pod; a
	// PodDisruptionBudget that forbids it is ErrEvictionBlocked, a missing
	// pod is success.
	Evict(ctx context.Context, pod PodView) error
	// DeletePod deletes a pod (a drain's force policy); NotFound is success.
	DeletePod(ctx context.Context, pod PodView) error
	// Workload is one observation of the cluster's work for the built-in
	// scaler: every list read in the same call. A list that cannot be read
	// (or caches not yet synced) is an error, never an empty observation.
	Workload(ctx context.Context) (scale.Observation, error)
	// JobOutput is the termination message of a lifecycle Job's pod (a
	// provisioning Job reports the instance it bought there), or "".
	JobOutput(ctx context.Context, job string) (string, error)
}

// ErrEvictionBlocked: the eviction API refused an eviction because a
// PodDisruptionBudget forbids it now (429); retry later.
var ErrEvictionBlocked = errors.New("eviction blocked by a PodDisruptionBudget")

// PodView is what a drain reads of a pod.
type PodView struct {
	Namespace string
	Name      string
	Node      string
	Phase     string
	// DaemonSet: owned by a DaemonSet (a drain leaves it: it follows its node).
	DaemonSet bool
	// Mirror: a static pod's mirror (cannot be evicted).
	Mirror bool
	// Deleting: a deletion is already under way.
	Deleting bool
}

// Key is namespace/name.
func (p PodView) Key() string { return p.Namespace + "/" + p.Name }

// Drainable: a pod the drain must move off the node: not finished, not a
// DaemonSet's, not a mirror.
func (p PodView) Drainable() bool {
	return p.Phase != "Succeeded" && p.Phase != "Failed" && !p.DaemonSet && !p.Mirror
}

// Host taints and labels (docs/design.md).
const (
	// TaintRefused marks a Node that joined unexpected: nothing schedules
	// or keeps running on it.
	TaintRefused = "claimstream.dev/refused"
	// LabelGroup on a Node names the group its host was made for (a
	// template's labels give it to the host); a Node with it and no slot is
	// refused.
	LabelGroup = "claimstream.dev/group"
)

// Labels and environment every lifecycle Job carries.
const (
	LabelClaim     = "claimstream.dev/claim"
	LabelSlot      = "claimstream.dev/slot"
	LabelAttempt   = "claimstream.dev/attempt"
	LabelOperation = "claimstream.dev/operation"
	// LabelPowerDriver marks a power driver's Job and its pod with the
	// driver (kubectl get jobs -l claimstream.dev/power-driver=ipmi).
	LabelPowerDriver = "claimstream.dev/power-driver"

	EnvSlot       = "CLAIMSTREAM_SLOT"
	EnvClaim      = "CLAIMSTREAM_CLAIM"
	EnvOperation  = "CLAIMSTREAM_OPERATION"
	EnvProviderID = "CLAIMSTREAM_PROVIDER_ID"
	EnvAddress    = "CLAIMSTREAM_ADDRESS"
)

// JobRequest is one lifecycle Job to create. The adapter decodes
// Spec.PodSpec into a core/v1 PodSpec, forces restartPolicy Never, adds Env
// to every container, and sets activeDeadlineSeconds = Timeout and
// backoffLimit 0. It sets no ttlSecondsAfterFinished: the spec's is
// claimstream's to honour once the Job's outcome is in the log
// (JobReaper). A Job has no ownerReferences: no garbage collector may take
// it mid-shutdown.
type JobRequest struct {
	Name      string
	Namespace string // empty: the adapter's namespace
	Slot      string
	Claim     string // empty for an input-law shutdown
	Attempt   int
	Operation string // OperationStartup | OperationShutdown
	Spec      events.JobSpec
	Timeout   time.Duration
	Labels    map[string]string
	// Annotations carry what a label value cannot (a slot's full name).
	Annotations map[string]string
	Env         map[string]string
}

// JobPhase is where a Job is.
type JobPhase string

const (
	JobRunning   JobPhase = "Running"
	JobSucceeded JobPhase = "Succeeded"
	JobFailed    JobPhase = "Failed"
)

// JobState is what the reactors read of a Job.
type JobState struct {
	Name      string
	Phase     JobPhase
	Labels    map[string]string
	CreatedAt time.Time
	// FinishedAt is when the Job completed or failed (zero while running).
	FinishedAt time.Time
	// Reason is the failure reason (DeadlineExceeded, BackoffLimitExceeded).
	Reason  string
	Message string
	// OwnTTL: the Job carries a ttlSecondsAfterFinished of its own (made
	// by a claimstream that left Jobs to Kubernetes' TTL controller).
	OwnTTL bool
}

// Finished: the Job completed or failed.
func (j JobState) Finished() bool { return j.Phase == JobSucceeded || j.Phase == JobFailed }

// JobReasonDeadlineExceeded is Kubernetes' reason for a Job that ran past
// activeDeadlineSeconds: the claim's JobTimeout.
const JobReasonDeadlineExceeded = "DeadlineExceeded"

// NodeView is what the reactors read of a Node.
type NodeView struct {
	Name          string
	ProviderID    string
	CreatedAt     time.Time
	Ready         bool
	Unschedulable bool
	Taints        []events.Taint
	Labels        map[string]string
	Address       string
	// ReadySince is the lastTransitionTime of the Ready condition (zero
	// when the Node has none): when it last became Ready or NotReady.
	ReadySince time.Time
}

// ToBeDeletedTaint is cluster-autoscaler's marker of a node it is removing.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// State is the observation a NodeObserved event records.
func (n NodeView) State() events.NodeState {
	st := events.NodeState{
		Name: n.Name, ProviderID: n.ProviderID, Present: true, Ready: n.Ready,
		Unschedulable: n.Unschedulable, Address: n.Address,
	}
	for _, t := range n.Taints {
		if t.Key == ToBeDeletedTaint {
			st.ToBeDeleted = true
		}
		st.Taints = append(st.Taints, t)
	}
	return st
}

// HasTaint reports whether the node carries a taint with t's key and effect.
func (n NodeView) HasTaint(t events.Taint) bool {
	for _, x := range n.Taints {
		if x.Key == t.Key && (t.Effect == "" || x.Effect == t.Effect) {
			return true
		}
	}
	return false
}
