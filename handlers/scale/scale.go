// Package scale holds the pure rules of the built-in scaler (docs/design.md):
// what work the cluster holds (Demand, Intent), how many nodes it needs
// (Target), what each node holds (Loads), and what to do about it
// (Decide). It does no I/O and reads time only as an argument; the
// handlers' BuiltinScaler reactor observes, decides through it, appends and
// acts.
package scale

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
)

// Defaults of a group that leaves its builtin settings out: one node at most, because every node is a machine bought or
// powered; eight pods a node; a two-minute hold.
const (
	DefaultPodsPerNode = 8
	DefaultMaxNodes    = 1
	DefaultHold        = 2 * time.Minute
)

// Labels and annotations the rules read.
const (
	// LifecycleLabel marks claimstream's own lifecycle Jobs and their pods
	// (handlers.LabelOperation): never work, or a boot would ask for itself.
	LifecycleLabel = "claimstream.dev/operation"
	// MirrorAnnotation marks a static pod's mirror.
	MirrorAnnotation = "kubernetes.io/config.mirror"
	// ControlPlaneNamespace holds the cluster's own addons: never work, so
	// an empty cluster can reach zero.
	ControlPlaneNamespace = "kube-system"
)

// Observation is one read of the work in the cluster: every list comes
// from the same pass. A list that failed is an error before an
// Observation exists, never an empty list.
type Observation struct {
	Pods         []*corev1.Pod
	Jobs         []*batchv1.Job
	Deployments  []*appsv1.Deployment
	StatefulSets []*appsv1.StatefulSet
	DaemonSets   []*appsv1.DaemonSet
	// ReplicaSets link a Deployment's pods to it (pod -> ReplicaSet ->
	// Deployment), so they are not counted twice.
	ReplicaSets []*appsv1.ReplicaSet
}

// ControlPlane: an object the cluster or claimstream applied for itself
// (kube-system, claimstream's lifecycle Jobs and their pods, mirror pods).
// It is never work.
func ControlPlane(o metav1.Object) bool {
	if o.GetNamespace() == ControlPlaneNamespace {
		return true
	}
	if _, ok := o.GetLabels()[LifecycleLabel]; ok {
		return true
	}
	_, mirror := o.GetAnnotations()[MirrorAnnotation]
	return mirror
}

// --- the items of work, one predicate each ----------------------------------

// podWants: a non-terminal pod (Pending, Running, Unknown; an empty phase
// reads Pending). A pod left Unknown by a departed node counts.
func podWants(p *corev1.Pod) bool {
	if ControlPlane(p) {
		return false
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	return true
}

// jobNeeds is the pods an unfinished, non-suspended Job still needs:
// min(parallelism, completions - succeeded), at least 1 (an unfinished Job
// is work however it is written).
func jobNeeds(j *batchv1.Job) int {
	if ControlPlane(j) || jobFinished(j) || (j.Spec.Suspend != nil && *j.Spec.Suspend) {
		return 0
	}
	par := 1
	if j.Spec.Parallelism != nil {
		par = int(*j.Spec.Parallelism)
	}
	need := par
	if j.Spec.Completions != nil {
		need = min(par, int(*j.Spec.Completions)-int(j.Status.Succeeded))
	} else if j.Status.Succeeded > 0 {
		// Without completions, one success finishes the Job; the
		// controller has not said so yet.
		need = int(j.Status.Active)
	}
	return max(need, 1)
}

func jobFinished(j *batchv1.Job) bool {
	if j.Status.CompletionTime != nil {
		return true
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// replicas reads spec.replicas; a missing one is 1 (the API's default).
func replicas(r *int32) int {
	if r == nil {
		return 1
	}
	return max(int(*r), 0)
}

func deploymentWants(d *appsv1.Deployment) int {
	if ControlPlane(d) {
		return 0
	}
	return replicas(d.Spec.Replicas)
}

func statefulSetWants(s *appsv1.StatefulSet) int {
	if ControlPlane(s) {
		return 0
	}
	return replicas(s.Spec.Replicas)
}

func daemonSetWants(d *appsv1.DaemonSet) int {
	if ControlPlane(d) {
		return 0
	}
	return max(int(d.Status.DesiredNumberScheduled), 0)
}

// --- Intent and Demand -------------------------------------------------------

// Intent is the coarse test: is there any work at all. It is written on
// its own, item by item, so a bug in the count cannot make zero unreachable
// or unleavable; TestDemandAgreesWithIntent holds Demand(o) > 0 == Intent(o)
// on every fixture.
func Intent(o Observation) bool {
	for _, p := range o.Pods {
		if podWants(p) {
			return true
		}
	}
	for _, j := range o.Jobs {
		if jobNeeds(j) > 0 {
			return true
		}
	}
	for _, d := range o.Deployments {
		if deploymentWants(d) > 0 {
			return true
		}
	}
	for _, s := range o.StatefulSets {
		if statefulSetWants(s) > 0 {
			return true
		}
	}
	for _, d := range o.DaemonSets {
		if daemonSetWants(d) > 0 {
			return true
		}
	}
	return false
}

// owner keys an owning object by kind, namespace and name (owners live in
// their dependents' namespace; names, unlike UIDs, are set by every client).
type owner struct{ kind, ns, name string }

// Demand is the pod-work COUNT, not a node count (the
// ratio is applied in Target): one per wanting pod, plus the pods each
// unfinished non-suspended Job needs, the replicas of every Deployment and
// StatefulSet, the desired count of every DaemonSet. Better than the seed:
// a pod owned by a workload that was counted (a Job, a StatefulSet, a
// DaemonSet, or a ReplicaSet of a counted Deployment) is that workload's
// work and is not counted again. Never negative.
func Demand(o Observation) int {
	n := 0
	counted := map[owner]bool{}
	for _, j := range o.Jobs {
		if k := jobNeeds(j); k > 0 {
			n += k
			counted[owner{"Job", j.Namespace, j.Name}] = true
		}
	}
	for _, d := range o.Deployments {
		if k := deploymentWants(d); k > 0 {
			n += k
			counted[owner{"Deployment", d.Namespace, d.Name}] = true
		}
	}
	for _, s := range o.StatefulSets {
		if k := statefulSetWants(s); k > 0 {
			n += k
			counted[owner{"StatefulSet", s.Namespace, s.Name}] = true
		}
	}
	for _, d := range o.DaemonSets {
		if k := daemonSetWants(d); k > 0 {
			n += k
			counted[owner{"DaemonSet", d.Namespace, d.Name}] = true
		}
	}
	// A ReplicaSet whose Deployment was counted is counted through it.
	for _, rs := range o.ReplicaSets {
		for _, ref := range rs.OwnerReferences {
			if ref.Kind == "Deployment" && counted[owner{"Deployment", rs.Namespace, ref.Name}] {
				counted[owner{"ReplicaSet", rs.Namespace, rs.Name}] = true
			}
		}
	}
	for _, p := range o.Pods {
		if !podWants(p) || ownedByCounted(p, counted) {
			continue
		}
		n++
	}
	return n
}

func ownedByCounted(p *corev1.Pod, counted map[owner]bool) bool {
	for _, ref := range p.OwnerReferences {
		if counted[owner{ref.Kind, p.Namespace, ref.Name}] {
			return true
		}
	}
	return false
}

// --- Target ------------------------------------------------------------------

// Options are a group's builtin settings; a zero field is the default.
type Options struct {
	PodsPerNode int
	MaxNodes    int
	Hold        time.Duration
}

// OptionsOf reads a group's builtin settings.
func OptionsOf(b *events.BuiltinScaler) Options {
	if b == nil {
		return Options{}
	}
	return Options{PodsPerNode: b.PodsPerNode, MaxNodes: b.MaxNodes, Hold: b.Hold.D()}
}

// PodsPerNodeOrDefault resolves the default.
func (o Options) PodsPerNodeOrDefault() int {
	if o.PodsPerNode > 0 {
		return o.PodsPerNode
	}
	return DefaultPodsPerNode
}

// MaxNodesOrDefault resolves the default.
func (o Options) MaxNodesOrDefault() int {
	if o.MaxNodes > 0 {
		return o.MaxNodes
	}
	return DefaultMaxNodes
}

// HoldOrDefault resolves the default.
func (o Options) HoldOrDefault() time.Duration {
	if o.Hold > 0 {
		return o.Hold
	}
	return DefaultHold
}

// Target is ceil(Demand / PodsPerNode) clamped to [1, MaxNodes] when there
// is intent, and 0 when there is not.
func Target(o Observation, opts Options) int {
	return TargetOf(Demand(o), Intent(o), opts)
}

// TargetOf is Target from a demand and an intent already read.
func TargetOf(demand int, intent bool, opts Options) int {
	if !intent {
		return 0
	}
	ppn := opts.PodsPerNodeOrDefault()
	t := (demand + ppn - 1) / ppn
	return min(max(t, 1), opts.MaxNodesOrDefault())
}

// --- Loads -------------------------------------------------------------------

// Load is what one node holds.
type Load struct {
	// Pods: every non-terminal pod bound to the node.
	Pods int
	// Tenant: the pods that are work (not DaemonSet-owned, not mirror, not
	// the control plane's, not claimstream's). A node with tenant work is
	// never chosen for scale-in.
	Tenant int
}

// Loads counts, for every node with a pod, what it holds.
func Loads(o Observation) map[string]Load {
	out := map[string]Load{}
	for _, p := range o.Pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		l := out[p.Spec.NodeName]
		l.Pods++
		if TenantWork(p) {
			l.Tenant++
		}
		out[p.Spec.NodeName] = l
	}
	return out
}

// TenantWork: a pod that is the pool's work, not its baseline.
func TenantWork(p *corev1.Pod) bool {
	if ControlPlane(p) || DaemonSetPod(p) {
		return false
	}
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// DaemonSetPod: owned by a DaemonSet (it follows its node; a drain leaves it).
func DaemonSetPod(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// --- Decide ------------------------------------------------------------------

// Action is what a decision does.
type Action string

// The actions. Every one but None is recorded (ScaleDecided): it changed
// something, or started or ended a hold, and the hold's clock is the
// recorded decision's time, so it survives a restart.
const (
	ActionNone      Action = "None"
	ActionProvision Action = "Provision" // create claims up to the target
	ActionHold      Action = "Hold"      // no intent: the hold before teardown starts
	ActionTeardown  Action = "Teardown"  // no intent past the hold: release every node
	ActionSurplus   Action = "Surplus"   // intent, more nodes than target: the hold before one release starts
	ActionRelease   Action = "Release"   // one idle node past the hold is released
	ActionSteady    Action = "Steady"    // a running hold ended: work came back, or the count is the target
)

// Node is one of the group's live claims that want a machine.
type Node struct {
	Slot string
	// Name is the Kubernetes Node's name when it is not the slot's (a
	// host registered under the name its startup Job reported).
	Name string
	// Ready: the claim is ready and its Node is present (only such a node
	// can be idle; a pending or booting claim runs to ready first).
	Ready bool
	// Since orders "newest": when the claim became ready (else requested).
	Since time.Time
	// Manual: the claim was made by hand (claimstream claim). It counts as
	// a node of the group, but the scaler never releases it: it lives until
	// the operator deletes it.
	Manual bool
}

// node is the name the node's pods are bound to.
func (n Node) node() string {
	if n.Name != "" {
		return n.Name
	}
	return n.Slot
}

// Last is the group's last recorded decision.
type Last struct {
	At     time.Time
	Action Action
	Slots  []string
}

// Group is what Decide reads of the group.
type Group struct {
	Name    string
	Options Options
	// MaxSize is the most live claims the group may hold (slots in
	// service, capped by maxSize); Free the slots a claim may take now.
	MaxSize int
	Free    int
	// Nodes are the live claims that want a machine (TargetSize).
	Nodes []Node
	Last  *Last
}

// Decision is what Decide returns.
type Decision struct {
	Action Action
	Demand int
	Target int
	Nodes  int
	Reason string
	// Create claims (Provision); Release these slots (Release, Teardown).
	Create  int
	Release []string
	// Slots are recorded with the event: the idle slots a Surplus hold
	// watches, or the slots released.
	Slots []string
	// Requeue asks for the next look no later than this (0: no need).
	Requeue time.Duration
}

// Record: the decision is written as a ScaleDecided.
func (d Decision) Record() bool { return d.Action != ActionNone }

// Decide is the built-in scale decision with the per-node scale-in
// of its supersession: provision up to the target; with no intent, hold,
// then release every node; with intent and more nodes than the target,
// release one idle node (no tenant work) per hold, the emptiest then the
// newest, never one running tenant work, never below the target.
func Decide(o Observation, g Group, now time.Time) Decision {
	intent := Intent(o)
	d := Decision{Demand: Demand(o), Nodes: len(g.Nodes)}
	d.Target = TargetOf(d.Demand, intent, g.Options)
	capped := ""
	if d.Target > g.MaxSize {
		capped = fmt.Sprintf(" (capped from %d by the group's %d slots in service)", d.Target, g.MaxSize)
		d.Target = g.MaxSize
	}
	hold := g.Options.HoldOrDefault()
	last := g.Last
	if last == nil {
		last = &Last{Action: ActionNone}
	}
	switch {
	case !intent && d.Nodes == 0:
		d.Action, d.Reason = ActionNone, "no work and no node"
	case !intent && releasable(g) == 0:
		d.Action, d.Reason = ActionNone, fmt.Sprintf("no work; %s made by hand kept until deleted by hand", claimsCount(d.Nodes))
	case !intent && last.Action != ActionHold:
		d.Action = ActionHold
		d.Reason = fmt.Sprintf("no work: holding %s before releasing %d nodes", hold, releasable(g))
		d.Requeue = hold
	case !intent:
		end := last.At.Add(hold)
		if now.Before(end) {
			d.Action, d.Reason, d.Requeue = ActionNone, fmt.Sprintf("no work: holding until %s", end.Format(time.RFC3339)), end.Sub(now)
			break
		}
		d.Action = ActionTeardown
		for _, n := range g.Nodes {
			if !n.Manual {
				d.Release = append(d.Release, n.Slot)
			}
		}
		d.Slots = d.Release
		d.Reason = fmt.Sprintf("no work for the whole hold of %s: releasing every node", hold)
		if kept := d.Nodes - len(d.Release); kept > 0 {
			d.Reason += fmt.Sprintf(" but the %s made by hand (kept until deleted by hand)", claimsCount(kept))
		}
	case d.Nodes < d.Target:
		d.Create = min(d.Target-d.Nodes, g.Free)
		if d.Create == 0 {
			d.Action, d.Reason = ActionNone, fmt.Sprintf("target %d, %d nodes, no free slot", d.Target, d.Nodes)
			break
		}
		d.Action = ActionProvision
		d.Reason = fmt.Sprintf("demand %d at %d pods a node needs %d nodes%s, %d counted: creating %s", d.Demand, g.Options.PodsPerNodeOrDefault(), d.Target, capped, d.Nodes, claimsCount(d.Create))
		if d.Create < d.Target-d.Nodes {
			d.Reason += fmt.Sprintf(" (%d free slots)", g.Free)
		}
	case d.Nodes == d.Target:
		d.Action, d.Reason = ActionNone, fmt.Sprintf("%d nodes for target %d", d.Nodes, d.Target)
		if last.Action == ActionHold || last.Action == ActionSurplus {
			d.Action, d.Reason = ActionSteady, fmt.Sprintf("the %s hold ends: %d nodes for target %d", last.Action, d.Nodes, d.Target)
		}
	default:
		d = surplus(d, g, Loads(o), last, hold, now)
	}
	return d
}

// idle lists the ready nodes with no tenant work, emptiest then newest.
func idle(g Group, loads map[string]Load) []string {
	var out []Node
	for _, n := range g.Nodes {
		if n.Ready && !n.Manual && loads[n.node()].Tenant == 0 {
			out = append(out, n)
		}
	}
	slices.SortStableFunc(out, func(a, b Node) int {
		if c := cmp.Compare(loads[a.node()].Pods, loads[b.node()].Pods); c != 0 {
			return c
		}
		if c := b.Since.Compare(a.Since); c != 0 {
			return c
		}
		return cmp.Compare(a.Slot, b.Slot)
	})
	names := make([]string, len(out))
	for i, n := range out {
		names[i] = n.Slot
	}
	return names
}

// surplus is the intent > target branch: a Surplus hold on the nodes idle
// now, then one Release of the emptiest, newest of them still idle. A node
// of the hold that took work (or went) restarts the hold: "idle for the
// whole hold" is read from the recorded decision, never remembered.
func surplus(d Decision, g Group, loads map[string]Load, last *Last, hold time.Duration, now time.Time) Decision {
	idleNow := idle(g, loads)
	over := d.Nodes - d.Target
	if len(idleNow) == 0 {
		d.Action = ActionNone
		d.Reason = fmt.Sprintf("%d nodes for target %d, and every surplus node runs tenant work or is not ready", d.Nodes, d.Target)
		if last.Action == ActionSurplus {
			d.Action, d.Reason = ActionSteady, "the Surplus hold ends: "+d.Reason
		}
		return d
	}
	if last.Action != ActionSurplus {
		d.Action, d.Slots, d.Requeue = ActionSurplus, idleNow, hold
		d.Reason = fmt.Sprintf("%d nodes for target %d: holding %s before releasing one of %d idle nodes", d.Nodes, d.Target, hold, len(idleNow))
		return d
	}
	var kept []string
	for _, slot := range idleNow {
		if slices.Contains(last.Slots, slot) {
			kept = append(kept, slot)
		}
	}
	if len(kept) < len(last.Slots) {
		// One of the watched nodes took work or went: the hold restarts
		// on the nodes idle now.
		d.Action, d.Slots, d.Requeue = ActionSurplus, idleNow, hold
		d.Reason = fmt.Sprintf("%d nodes for target %d: a watched node took work or went; holding %s again on %d idle nodes", d.Nodes, d.Target, hold, len(idleNow))
		return d
	}
	end := last.At.Add(hold)
	if now.Before(end) {
		d.Action, d.Requeue = ActionNone, end.Sub(now)
		d.Reason = fmt.Sprintf("%d nodes for target %d: holding until %s", d.Nodes, d.Target, end.Format(time.RFC3339))
		return d
	}
	// kept is in idle order: emptiest, then newest.
	d.Action, d.Release, d.Slots = ActionRelease, kept[:1], kept[:1]
	d.Reason = fmt.Sprintf("%d nodes for target %d (%d over): %s was idle for the whole hold of %s (emptiest, then newest)", d.Nodes, d.Target, over, kept[0], hold)
	return d
}

// claimsCount is "1 claim" or "N claims" (the reason is read in the audit).
func claimsCount(n int) string {
	if n == 1 {
		return "1 claim"
	}
	return fmt.Sprintf("%d claims", n)
}

// releasable counts the nodes the scaler may release (not made by hand).
func releasable(g Group) int {
	n := 0
	for _, x := range g.Nodes {
		if !x.Manual {
			n++
		}
	}
	return n
}
