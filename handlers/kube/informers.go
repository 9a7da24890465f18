package kube

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// listWatcher is one resource of a typed client (client.CoreV1().Nodes(),
// client.BatchV1().Jobs(ns), ...), L its list type.
type listWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// newInformer is the shared informer client-go's informer factory builds
// for one resource (informers/<group>/<version>/<kind>.go), without the
// factory: the factory's package links an informer and a lister for every
// API group (see Client). client is asked, as the factory asks it, whether
// it serves watch-list streams (a fake does not). selector, when set, is
// the label selector of the list and the watch; trim is the cache's
// transform (trimNode, trimPod, trimMeta): the cache keeps only what the
// code reads.
func newInformer[L runtime.Object](client any, api listWatcher[L], obj runtime.Object, resync time.Duration, selector string, trim cache.TransformFunc) cache.SharedIndexInformer {
	tweak := func(opts *metav1.ListOptions) {
		if selector != "" {
			opts.LabelSelector = selector
		}
	}
	inf := cache.NewSharedIndexInformer(
		cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				tweak(&opts)
				return api.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				tweak(&opts)
				return api.Watch(ctx, opts)
			},
		}, client),
		obj, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	)
	if trim != nil {
		_ = inf.SetTransform(trim) // fails only once started
	}
	return inf
}

// lastApplied is kubectl apply's copy of the whole object: as big as the
// object, and read by nothing here.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimmedMeta is m without its managedFields and kubectl's last applied
// copy: what server-side apply and kubectl keep of every writer's fields,
// often the larger part of a small object's metadata. The maps are
// shared with m unless one is dropped from.
func trimmedMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok {
		a := make(map[string]string, len(m.Annotations)-1)
		for k, v := range m.Annotations {
			if k != lastApplied {
				a[k] = v
			}
		}
		m.Annotations = a
	}
	return m
}

// trimNode keeps of a Node what NodeViewOf, the Node index, the object
// watchers, the patches (the whole spec: a taints patch replaces the list)
// and the Events' references read: its metadata, its spec, its Ready
// condition and its addresses. The images a kubelet lists (often half the
// Node), its capacity, its volumes and its version info are dropped.
// The result is a new Node: the informer's object is not changed.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown is trimmed already
	}
	out := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: trimmedMeta(n.ObjectMeta), Spec: n.Spec}
	out.Status.Addresses = n.Status.Addresses
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			c.Message = "" // the kubelet's prose, read by no one here
			out.Status.Conditions = []corev1.NodeCondition{c}
			break
		}
	}
	return out, nil
}

// trimPod keeps of a pod what the built-in scaler reads: its metadata (the
// owners, the mirror annotation), its spec (requests, node, scheduling)
// and its phase. Its container statuses and conditions are dropped.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: trimmedMeta(p.ObjectMeta), Spec: p.Spec, Status: corev1.PodStatus{Phase: p.Status.Phase}}, nil
}

// trimMeta drops the managedFields and kubectl's last applied copy of a
// Job, a Deployment, a StatefulSet, a DaemonSet or a ReplicaSet (their
// spec and status are read), as a new object.
func trimMeta(obj any) (any, error) {
	switch o := obj.(type) {
	case *batchv1.Job:
		cp := *o
		cp.ObjectMeta = trimmedMeta(o.ObjectMeta)
		return &cp, nil
	case *appsv1.Deployment:
		cp := *o
		cp.ObjectMeta = trimmedMeta(o.ObjectMeta)
		return &cp, nil
	case *appsv1.StatefulSet:
		cp := *o
		cp.ObjectMeta = trimmedMeta(o.ObjectMeta)
		return &cp, nil
	case *appsv1.DaemonSet:
		cp := *o
		cp.ObjectMeta = trimmedMeta(o.ObjectMeta)
		return &cp, nil
	case *appsv1.ReplicaSet:
		cp := *o
		cp.ObjectMeta = trimmedMeta(o.ObjectMeta)
		return &cp, nil
	}
	return obj, nil
}

// informerRuns runs informers until their context ends and waits for them,
// as the factory's Start and Shutdown do.
type informerRuns struct {
	wg sync.WaitGroup
}

func (r *informerRuns) start(ctx context.Context, infs ...cache.SharedIndexInformer) {
	for _, inf := range infs {
		r.wg.Go(func() { inf.RunWithContext(ctx) })
	}
}

// wait returns once every informer started has stopped (after ctx ended).
func (r *informerRuns) wait() { r.wg.Wait() }
