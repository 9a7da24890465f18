package kube

import (
	"context"
	"sync"
	"time"

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
// it serves watch-list streams (a fake does not).
func newInformer[L runtime.Object](client any, api listWatcher[L], obj runtime.Object, resync time.Duration) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(
		cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return api.List(ctx, opts)
			},
			WatchFuncWithContext: api.Watch,
		}, client),
		obj, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	)
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
