package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/scale"
)

// The workload informers of the built-in scaler (pods, Jobs, Deployments,
// StatefulSets, DaemonSets, ReplicaSets, cluster-wide) are started on the
// first Workload call, so a pool without a builtin group never lists (nor
// needs the RBAC for) the cluster's work.
type workInformers struct {
	stores    map[string]cache.SharedIndexInformer // by resource
	hasSynced []cache.InformerSynced
}

func (c *Cluster) startWork() *workInformers {
	c.workMu.Lock()
	defer c.workMu.Unlock()
	if c.work != nil || c.runCtx == nil {
		return c.work
	}
	cl, all, r := c.client, metav1.NamespaceAll, c.resync
	w := &workInformers{stores: map[string]cache.SharedIndexInformer{
		"pods":         newInformer[*corev1.PodList](cl, cl.CoreV1().Pods(all), &corev1.Pod{}, r, "", trimPod),
		"jobs":         newInformer[*batchv1.JobList](cl, cl.BatchV1().Jobs(all), &batchv1.Job{}, r, "", trimMeta),
		"deployments":  newInformer[*appsv1.DeploymentList](cl, cl.AppsV1().Deployments(all), &appsv1.Deployment{}, r, "", trimMeta),
		"statefulsets": newInformer[*appsv1.StatefulSetList](cl, cl.AppsV1().StatefulSets(all), &appsv1.StatefulSet{}, r, "", trimMeta),
		"daemonsets":   newInformer[*appsv1.DaemonSetList](cl, cl.AppsV1().DaemonSets(all), &appsv1.DaemonSet{}, r, "", trimMeta),
		"replicasets":  newInformer[*appsv1.ReplicaSetList](cl, cl.AppsV1().ReplicaSets(all), &appsv1.ReplicaSet{}, r, "", trimMeta),
	}}
	for res, inf := range w.stores {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { c.notify(); c.settle.note("work/"+res, o, false) },
			UpdateFunc: func(_, o any) { c.notify(); c.settle.note("work/"+res, o, false) },
			DeleteFunc: func(o any) { c.notify(); c.settle.note("work/"+res, o, true) },
		})
		w.hasSynced = append(w.hasSynced, inf.HasSynced)
	}
	c.runs.start(c.runCtx, slices.Collect(maps.Values(w.stores))...)
	c.work = w
	return w
}

// workSyncWait bounds how long the first Workload call waits for the
// workload caches it started.
const workSyncWait = 10 * time.Second

func (w *workInformers) synced() bool {
	for _, inf := range w.stores {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// ErrWorkloadNotSynced: the workload caches have not been filled yet.
var ErrWorkloadNotSynced = errors.New("workload caches are not synced yet")

// Workload implements handlers.Cluster: one read of every workload lister.
func (c *Cluster) Workload(ctx context.Context) (scale.Observation, error) {
	w := c.startWork()
	if w == nil {
		return scale.Observation{}, fmt.Errorf("workload observation: the cluster adapter is not started")
	}
	if !w.synced() {
		// The first call started the informers: give them a moment.
		wctx, cancel := context.WithTimeout(ctx, workSyncWait)
		ok := cache.WaitForCacheSync(wctx.Done(), w.hasSynced...)
		cancel()
		if !ok {
			return scale.Observation{}, ErrWorkloadNotSynced
		}
	}
	var o scale.Observation
	var err error
	all := labels.Everything()
	if o.Pods, err = corelisters.NewPodLister(w.stores["pods"].GetIndexer()).List(all); err != nil {
		return scale.Observation{}, fmt.Errorf("list pods: %w", err)
	}
	if o.Jobs, err = batchlisters.NewJobLister(w.stores["jobs"].GetIndexer()).List(all); err != nil {
		return scale.Observation{}, fmt.Errorf("list jobs: %w", err)
	}
	if o.Deployments, err = appslisters.NewDeploymentLister(w.stores["deployments"].GetIndexer()).List(all); err != nil {
		return scale.Observation{}, fmt.Errorf("list deployments: %w", err)
	}
	if o.StatefulSets, err = appslisters.NewStatefulSetLister(w.stores["statefulsets"].GetIndexer()).List(all); err != nil {
		return scale.Observation{}, fmt.Errorf("list statefulsets: %w", err)
	}
	if o.DaemonSets, err = appslisters.NewDaemonSetLister(w.stores["daemonsets"].GetIndexer()).List(all); err != nil {
		return scale.Observation{}, fmt.Errorf("list daemonsets: %w", err)
	}
	if o.ReplicaSets, err = appslisters.NewReplicaSetLister(w.stores["replicasets"].GetIndexer()).List(all); err != nil {
		return scale.Observation{}, fmt.Errorf("list replicasets: %w", err)
	}
	return o, nil
}

// Nodes implements handlers.Cluster.
func (c *Cluster) Nodes() []handlers.NodeView {
	var out []handlers.NodeView
	for _, obj := range c.nodes.GetStore().List() {
		if n, ok := c.ownNode(obj.(*corev1.Node)); ok {
			out = append(out, NodeViewOf(n))
		}
	}
	slices.SortFunc(out, func(a, b handlers.NodeView) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// AddNodeTaint implements handlers.Cluster.
func (c *Cluster) AddNodeTaint(ctx context.Context, name string, t events.Taint) error {
	n, ok := c.node(name)
	if !ok {
		return nil
	}
	for _, x := range n.Spec.Taints {
		if x.Key == t.Key && string(x.Effect) == t.Effect {
			return nil
		}
	}
	all := append(slices.Clone(n.Spec.Taints), TaintOf(t))
	return c.patchNode(ctx, name, map[string]any{"spec": map[string]any{"taints": all}})
}

// RemoveNodeTaint implements handlers.Cluster.
func (c *Cluster) RemoveNodeTaint(ctx context.Context, name, key string) error {
	n, ok := c.node(name)
	if !ok {
		return nil
	}
	kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == key })
	if len(kept) == len(n.Spec.Taints) {
		return nil
	}
	if kept == nil {
		kept = []corev1.Taint{}
	}
	return c.patchNode(ctx, name, map[string]any{"spec": map[string]any{"taints": kept}})
}

// ListPodsOnNode implements handlers.Cluster: a field-selected list from
// the API (the fake clientset ignores field selectors, so it is filtered
// here too).
func (c *Cluster) ListPodsOnNode(ctx context.Context, node string) ([]handlers.PodView, error) {
	l, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("list pods on %s: %w", node, err)
	}
	var out []handlers.PodView
	for i := range l.Items {
		if p := &l.Items[i]; p.Spec.NodeName == node {
			out = append(out, PodViewOf(p))
		}
	}
	slices.SortFunc(out, func(a, b handlers.PodView) int { return strings.Compare(a.Key(), b.Key()) })
	return out, nil
}

// PodViewOf reads what a drain needs of a pod.
func PodViewOf(p *corev1.Pod) handlers.PodView {
	_, mirror := p.Annotations[scale.MirrorAnnotation]
	return handlers.PodView{
		Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase),
		DaemonSet: scale.DaemonSetPod(p), Mirror: mirror, Deleting: p.DeletionTimestamp != nil,
	}
}

// Evict implements handlers.Cluster through the policy/v1 Eviction
// subresource, which honours PodDisruptionBudgets.
func (c *Cluster) Evict(ctx context.Context, p handlers.PodView) error {
	err := c.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsTooManyRequests(err):
		return fmt.Errorf("evict %s: %w: %v", p.Key(), handlers.ErrEvictionBlocked, err)
	}
	return fmt.Errorf("evict %s: %w", p.Key(), err)
}

// DeletePod implements handlers.Cluster.
func (c *Cluster) DeletePod(ctx context.Context, p handlers.PodView) error {
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("delete pod %s: %w", p.Key(), err)
}

// Secret reads the data of a Secret of the Jobs' namespace, straight from
// the API server: no Secret is cached. A refusal says which permission
// is missing.
func (c *Cluster) Secret(ctx context.Context, name string) (map[string][]byte, error) {
	s, err := c.client.CoreV1().Secrets(c.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("serve may not read it: grant get on Secret %s in namespace %s (chart value power.credentialsSecrets): %w", name, c.namespace, err)
	case err != nil:
		return nil, err
	}
	return s.Data, nil
}

// JobOutput implements handlers.Cluster: the termination message of the
// newest terminated container of the Job's pods.
func (c *Cluster) JobOutput(ctx context.Context, job string) (string, error) {
	l, err := c.client.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"batch.kubernetes.io/job-name": job}.String()})
	if err != nil {
		return "", fmt.Errorf("list pods of Job %s: %w", job, err)
	}
	out := ""
	var at metav1.Time
	for _, p := range l.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.Message != "" && !t.FinishedAt.Before(&at) {
				out, at = t.Message, t.FinishedAt
			}
		}
	}
	return out, nil
}
