package kube

import (
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/claimstream/claimstream/handlers"
)

// objectWatchers are told which Node or Job changed, so the reactors'
// work queue enqueues only the slot it concerns.
type objectWatchers struct {
	mu  sync.RWMutex
	fns []func(handlers.ObjectChange)
}

var _ handlers.ObjectWatcher = (*Cluster)(nil)

// WatchObjects calls fn after every change the Node and Job caches see
// (informer handlers: fn must not block).
func (c *Cluster) WatchObjects(fn func(handlers.ObjectChange)) {
	c.watch.mu.Lock()
	c.watch.fns = append(c.watch.fns, fn)
	c.watch.mu.Unlock()
}

func (c *Cluster) objectChanged(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	var ch handlers.ObjectChange
	switch v := o.(type) {
	case *corev1.Node:
		ch = handlers.ObjectChange{Kind: handlers.KindNode, Name: v.Name, ProviderID: v.Spec.ProviderID, GroupLabel: v.Labels[handlers.LabelGroup]}
	case *batchv1.Job:
		ch = handlers.ObjectChange{Kind: handlers.KindJob, Name: v.Name, Slot: handlers.SlotOfJob(v.Labels, v.Annotations)}
	default:
		return
	}
	c.watch.mu.RLock()
	defer c.watch.mu.RUnlock()
	for _, fn := range c.watch.fns {
		fn(ch)
	}
}
