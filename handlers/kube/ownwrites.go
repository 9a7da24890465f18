package kube

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
)

// ownWrites are the writes this adapter made that its informers have not
// delivered yet: the object the API server answered a create or patch
// with, or the delete it acknowledged. Reads look here first, so a pass
// right after a write sees it (read-your-writes, as client-go's
// ControllerExpectations or Karpenter's launch cache give their
// controllers) and never posts it twice. An entry ends when the informer
// delivers the version written or a later one (or the delete), or after
// ownWriteTTL: a relist can skip a version, and the informer is the truth
// again then. Versions are compared as the numbers the API server makes
// of them (etcd revisions); one that is no number must match exactly.
type ownWrites struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	by    map[string]ownWrite
}

type ownWrite struct {
	obj   runtime.Object // nil: deleted
	rv    string
	until time.Time
}

// ownWriteTTL bounds how long a write the informer never delivered is
// read in its place.
const ownWriteTTL = time.Minute

func newOwnWrites(c clock.PassiveClock) *ownWrites {
	if c == nil {
		c = clock.RealClock{}
	}
	return &ownWrites{clock: c, by: map[string]ownWrite{}}
}

func ownKey(cache, key string) string { return cache + "/" + key }

// wrote keeps obj (nil: deleted) as what key reads until the informer
// delivers it; cached is what the informer holds now (nil: nothing), so a
// write it already delivered, or passed, is not kept.
func (w *ownWrites) wrote(key string, obj runtime.Object, cached runtime.Object) {
	e := ownWrite{obj: obj, until: w.clock.Now().Add(ownWriteTTL)}
	if obj != nil {
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		e.rv = m.GetResourceVersion()
		if cached != nil {
			if cm, err := meta.Accessor(cached); err == nil && atOrPast(cm.GetResourceVersion(), e.rv) {
				return
			}
		}
	}
	w.mu.Lock()
	w.by[key] = e
	w.mu.Unlock()
}

// read returns the write the informer has not delivered yet: found is
// false when there is none (read the cache), obj nil when it was a delete.
func (w *ownWrites) read(key string) (obj runtime.Object, found bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.by[key]
	if !ok {
		return nil, false
	}
	if w.clock.Now().After(e.until) {
		delete(w.by, key)
		return nil, false
	}
	return e.obj, true
}

// delivered is the informer's handler: the write ends when the informer
// shows the version written, or shows the object deleted (after a delete
// of ours, or a delete of the version written).
func (w *ownWrites) delivered(key string, o any, deleted bool) {
	if t, ok := o.(cacheTombstone); ok {
		o = t.Obj
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.by[key]
	if !ok {
		return
	}
	if (e.obj == nil && deleted) || (e.obj != nil && atOrPast(m.GetResourceVersion(), e.rv)) {
		delete(w.by, key)
	}
}

// atOrPast reports whether resourceVersion got is want or later.
func atOrPast(got, want string) bool {
	if got == want {
		return true
	}
	g, err1 := strconv.ParseUint(got, 10, 64)
	x, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && g >= x
}
