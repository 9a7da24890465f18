// Package kube is the client-go implementation of handlers.Cluster: shared
// informers for Nodes and for the lifecycle Jobs of one namespace, writes
// through the API.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
)

// Options configure a Cluster.
type Options struct {
	// Namespace the lifecycle Jobs live in (default "claimstream").
	Namespace string
	// Resync is the informers' resync period (default 0: none).
	Resync time.Duration
	// Clock times how long a write of the adapter is read in place of
	// the informers' caches before they deliver it (default the real
	// clock).
	Clock clock.PassiveClock
	// PowerImage is the image a power driver's Job runs (`claimstream
	// power`); without it such a Job cannot be built.
	PowerImage string
}

// Cluster implements handlers.Cluster over a Kubernetes API.
type Cluster struct {
	client     Client
	namespace  string
	powerImage string

	nodes cache.SharedIndexInformer
	jobs  cache.SharedIndexInformer
	runs  informerRuns

	mu      sync.Mutex
	changed chan struct{}
	watch   objectWatchers

	// The built-in scaler's workload informers (workload.go).
	resync time.Duration
	workMu sync.Mutex
	runCtx context.Context
	work   *workInformers

	own *ownWrites
	// settle is the fake's Settle (Fake.NewCluster); nil over a real API
	// server, which has nothing to settle against.
	settle *settler
}

var _ handlers.Cluster = (*Cluster)(nil)

// New builds the informers. Call Start, then WaitForSync.
func New(client Client, opts Options) *Cluster {
	if opts.Namespace == "" {
		opts.Namespace = "claimstream"
	}
	c := &Cluster{client: client, namespace: opts.Namespace, powerImage: opts.PowerImage, changed: make(chan struct{}), resync: opts.Resync, own: newOwnWrites(opts.Clock)}
	c.nodes = newInformer[*corev1.NodeList](client, client.CoreV1().Nodes(), &corev1.Node{}, opts.Resync, "", trimNode)
	// Of the namespace's Jobs, the lifecycle Jobs only (they all carry a
	// claim label): the namespace may be shared with other work.
	c.jobs = newInformer[*batchv1.JobList](client, client.BatchV1().Jobs(opts.Namespace), &batchv1.Job{}, opts.Resync, handlers.LabelClaim, trimMeta)
	_ = indexNodesByGroup(c.nodes) // fails only once started; NodesLabelled falls back
	_ = indexJobsBySlot(c.jobs)    // fails only once started
	for name, inf := range map[string]cache.SharedIndexInformer{"nodes": c.nodes, "jobs": c.jobs} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				c.delivered(name, o, false)
				c.notify()
				c.objectChanged(o)
				c.settle.note(name, o, false)
			},
			UpdateFunc: func(_, o any) {
				c.delivered(name, o, false)
				c.notify()
				c.objectChanged(o)
				c.settle.note(name, o, false)
			},
			DeleteFunc: func(o any) { c.delivered(name, o, true); c.notify(); c.objectChanged(o); c.settle.note(name, o, true) },
		})
	}
	return c
}

// Namespace is where the lifecycle Jobs are created.
func (c *Cluster) Namespace() string { return c.namespace }

// Client is the clientset the cluster writes through.
func (c *Cluster) Client() Client { return c.client }

// Start runs the informers until ctx ends.
func (c *Cluster) Start(ctx context.Context) {
	c.workMu.Lock()
	c.runCtx = ctx
	c.workMu.Unlock()
	c.runs.start(ctx, c.nodes, c.jobs)
}

// Shutdown waits for the informers' goroutines after ctx ended.
func (c *Cluster) Shutdown() {
	c.workMu.Lock()
	c.work, c.runCtx = nil, nil
	c.workMu.Unlock()
	c.runs.wait() // the workload informers too (startWork)
}

// WaitForSync blocks until both caches are filled or ctx ends.
func (c *Cluster) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), c.nodes.HasSynced, c.jobs.HasSynced)
}

// HasSynced implements handlers.Cluster.
func (c *Cluster) HasSynced() bool { return c.nodes.HasSynced() && c.jobs.HasSynced() }

// Changed implements handlers.Cluster.
func (c *Cluster) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *Cluster) notify() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Settle waits until the caches, and the handlers that tell WatchObjects
// and Changed, reflect every write the fake knows of (Fake.NewCluster;
// settle.go). A cluster over a real API server returns at once. The
// simulator and the tests call it between steps so that a pass on a fake
// clock reads what the previous step wrote.
func (c *Cluster) Settle(ctx context.Context) error {
	if c.settle == nil {
		return nil
	}
	return c.settle.wait(ctx, c)
}

// cacheTombstone is what a delete handler gets for an object whose
// final state the informer missed.
type cacheTombstone = cache.DeletedFinalStateUnknown

func metaOf(obj any) (metav1.Object, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		return o, nil
	case *batchv1.Job:
		return o, nil
	case metav1.Object:
		return o, nil
	}
	return nil, fmt.Errorf("unexpected %T", obj)
}

// objectKey is the object an informer handler was given (a tombstone's
// last state unwrapped), its metadata and its cache key (namespace/name).
func objectKey(o any) (any, metav1.Object, string, bool) {
	if t, ok := o.(cacheTombstone); ok {
		o = t.Obj
	}
	m, err := metaOf(o)
	if err != nil {
		return o, nil, "", false
	}
	key := m.GetName()
	if ns := m.GetNamespace(); ns != "" {
		key = ns + "/" + key
	}
	return o, m, key, true
}

// delivered ends the adapter's own write of an object the informer now
// shows (ownWrites).
func (c *Cluster) delivered(cache string, o any, deleted bool) {
	o, _, key, ok := objectKey(o)
	if !ok {
		return
	}
	c.own.delivered(ownKey(cache, key), o, deleted)
}

// Job implements handlers.Cluster: the adapter's own write of the Job
// first, then the informer's cache.
func (c *Cluster) Job(name string) (handlers.JobState, bool) {
	key := c.namespace + "/" + name
	if o, found := c.own.read(ownKey("jobs", key)); found {
		if o == nil {
			return handlers.JobState{}, false
		}
		return JobStateOf(o.(*batchv1.Job)), true
	}
	obj, ok, err := c.jobs.GetStore().GetByKey(key)
	if err != nil || !ok {
		return handlers.JobState{}, false
	}
	return JobStateOf(obj.(*batchv1.Job)), true
}

// GetJob implements handlers.Cluster: a read from the API server (a list
// of the one name, quorum-read: the role grants list, not get).
func (c *Cluster) GetJob(ctx context.Context, name string) (handlers.JobState, bool, error) {
	j, err := c.liveJob(ctx, c.namespace, name)
	if err != nil || j == nil {
		return handlers.JobState{}, false, err
	}
	return JobStateOf(j), true, nil
}

func (c *Cluster) liveJob(ctx context.Context, ns, name string) (*batchv1.Job, error) {
	l, err := c.client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, fmt.Errorf("read Job %s/%s: %w", ns, name, err)
	}
	for i := range l.Items { // the fake clientset ignores field selectors
		if l.Items[i].Name == name {
			return &l.Items[i], nil
		}
	}
	return nil, nil
}

// GetNode implements handlers.Cluster: a read from the API server (a
// list of the one name, as GetJob).
func (c *Cluster) GetNode(ctx context.Context, name string) (handlers.NodeView, bool, error) {
	l, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return handlers.NodeView{}, false, fmt.Errorf("read Node %s: %w", name, err)
	}
	for i := range l.Items {
		if l.Items[i].Name == name {
			return NodeViewOf(&l.Items[i]), true, nil
		}
	}
	return handlers.NodeView{}, false, nil
}

// Node implements handlers.Cluster.
func (c *Cluster) Node(name string) (handlers.NodeView, bool) {
	n, ok := c.node(name)
	if !ok {
		return handlers.NodeView{}, false
	}
	return NodeViewOf(n), true
}

// node is the adapter's own write of the Node, else the informer's.
func (c *Cluster) node(name string) (*corev1.Node, bool) {
	if o, found := c.own.read(ownKey("nodes", name)); found {
		if o == nil {
			return nil, false
		}
		return o.(*corev1.Node), true
	}
	obj, ok, err := c.nodes.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.Node), true
}

// ownNode is a cached Node as the adapter's own write left it (a patch
// the informer has not delivered); ok is false when the adapter deleted it.
func (c *Cluster) ownNode(n *corev1.Node) (*corev1.Node, bool) {
	if o, found := c.own.read(ownKey("nodes", n.Name)); found {
		if o == nil {
			return nil, false
		}
		return o.(*corev1.Node), true
	}
	return n, true
}

// cachedJob and cachedNode are what the informers hold (nil: nothing).
func (c *Cluster) cachedJob(ns, name string) runtime.Object {
	if obj, ok, err := c.jobs.GetStore().GetByKey(ns + "/" + name); err == nil && ok {
		return obj.(*batchv1.Job)
	}
	return nil
}

func (c *Cluster) cachedNode(name string) runtime.Object {
	if obj, ok, err := c.nodes.GetStore().GetByKey(name); err == nil && ok {
		return obj.(*corev1.Node)
	}
	return nil
}

// CreateJob implements handlers.Cluster: created is false when the Job
// was there already (AlreadyExists). Either way the next look sees it.
func (c *Cluster) CreateJob(ctx context.Context, req handlers.JobRequest) (created bool, err error) {
	job, err := BuildJob(JobDefaults{Namespace: c.namespace, PowerImage: c.powerImage}, req)
	if err != nil {
		return false, err
	}
	jobs := c.client.BatchV1().Jobs(job.Namespace)
	out, err := jobs.Create(ctx, job, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.own.wrote(ownKey("jobs", job.Namespace+"/"+job.Name), out, c.cachedJob(job.Namespace, job.Name))
		return true, nil
	case apierrors.IsAlreadyExists(err):
		if cur, gerr := c.liveJob(ctx, job.Namespace, job.Name); gerr == nil && cur != nil {
			c.own.wrote(ownKey("jobs", job.Namespace+"/"+job.Name), cur, c.cachedJob(job.Namespace, job.Name))
		}
		return false, nil
	}
	return false, err
}

// Cordon implements handlers.Cluster.
func (c *Cluster) Cordon(ctx context.Context, node string) error {
	return c.setUnschedulable(ctx, node, true)
}

// Uncordon implements handlers.Cluster.
func (c *Cluster) Uncordon(ctx context.Context, node string) error {
	return c.setUnschedulable(ctx, node, false)
}

func (c *Cluster) setUnschedulable(ctx context.Context, name string, v bool) error {
	n, ok := c.node(name)
	if !ok || n.Spec.Unschedulable == v {
		return nil
	}
	return c.patchNode(ctx, name, map[string]any{"spec": map[string]any{"unschedulable": v}})
}

// DeleteNode implements handlers.Cluster.
func (c *Cluster) DeleteNode(ctx context.Context, name string) error {
	err := c.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, cached := c.node(name); cached {
		c.own.wrote(ownKey("nodes", name), nil, nil)
	}
	return nil
}

// ApplySlotConfig implements handlers.Cluster: missing or different labels
// are set, missing taints are added; nothing else is touched.
func (c *Cluster) ApplySlotConfig(ctx context.Context, name string, labels map[string]string, taints []events.Taint) error {
	n, ok := c.node(name)
	if !ok {
		return nil
	}
	// Nothing is built unless something is missing: a ready host's
	// reactors ask again at every pass.
	var setLabels map[string]string
	for k, v := range labels {
		if cur, ok := n.Labels[k]; !ok || cur != v {
			if setLabels == nil {
				setLabels = map[string]string{}
			}
			setLabels[k] = v
		}
	}
	var all []corev1.Taint
	for _, t := range taints {
		found := false
		for _, x := range n.Spec.Taints {
			if x.Key == t.Key && string(x.Effect) == t.Effect {
				found = true
				break
			}
		}
		if !found {
			if all == nil {
				all = append([]corev1.Taint(nil), n.Spec.Taints...)
			}
			all = append(all, TaintOf(t))
		}
	}
	if setLabels == nil && all == nil {
		return nil
	}
	patch := map[string]any{}
	if setLabels != nil {
		patch["metadata"] = map[string]any{"labels": setLabels}
	}
	if all != nil {
		patch["spec"] = map[string]any{"taints": all}
	}
	return c.patchNode(ctx, name, patch)
}

func (c *Cluster) patchNode(ctx context.Context, name string, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	out, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	c.own.wrote(ownKey("nodes", name), out, c.cachedNode(name))
	return nil
}
