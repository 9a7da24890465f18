package kube

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// FakeOptions make a Fake no kinder than an API server: its watches lag
// behind its writes, a TTL controller removes finished Jobs, and it
// refuses invalid names, duplicates and stale updates.
type FakeOptions struct {
	// WatchDelay is how long a write of a Node, Job or workload object
	// takes to reach the watches (the informers), and Versions with them,
	// so a Settle waits for what is due and no more. Zero is
	// DefaultWatchDelay; negative is none (every write is seen at once).
	// Reads through the clients (Get, List) see a write at once, as an
	// API server's do.
	WatchDelay time.Duration
	// Clock times the delay and the TTL controller (default the real
	// clock). On a fake clock a write reaches the informers only once the
	// clock passed its due time.
	Clock clock.Clock
	// NoTTLController leaves finished Jobs alone (the simulator deletes
	// them on its own schedule).
	NoTTLController bool
}

// DefaultWatchDelay is a Fake's watch lag unless FakeOptions say
// otherwise: an informer a few milliseconds behind, as one on a real API
// server usually is.
const DefaultWatchDelay = 20 * time.Millisecond

type lag struct {
	delay time.Duration
	clock clock.Clock
	ttl   bool
	// pending are the writes whose watch events are not yet due, in due
	// order; due is the due time of each by event key (eventKey).
	pending []pendingWrite
	due     map[string]time.Time
	// expiries are the finished Jobs the TTL controller deletes, by time.
	expiries []expiry
	expiring bool
	// wake is closed when pending writes became due (promote): the
	// delayed watches look at their next event again.
	wake chan struct{}
}

type expiry struct {
	ns, name, rv string
	at           time.Time
}

type pendingWrite struct {
	gvr          schema.GroupVersionResource
	ns, name, rv string
	key          string
	due          time.Time
}

func newLag(o FakeOptions) lag {
	l := lag{delay: o.WatchDelay, clock: o.Clock, ttl: !o.NoTTLController, due: map[string]time.Time{}, wake: make(chan struct{})}
	if l.delay == 0 {
		l.delay = DefaultWatchDelay
	}
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	return l
}

// eventKey names one watch event: a write by the version it wrote, a
// delete by the last version the object had.
func eventKey(resource, ns, name, rv string, deleted bool) string {
	k := resource + "/" + ns + "/" + name + "@" + rv
	if deleted {
		k = "-" + k
	}
	return k
}

// written records a write (rv) or delete (rv "", old its last version),
// f.mu held: at once without a delay, else when its event is due.
func (f *Fake) written(gvr schema.GroupVersionResource, ns, name, rv, old string) {
	if gvr == nodesGVR {
		ns = ""
	}
	if f.lag.delay < 0 {
		f.apply(gvr, ns, name, rv)
		return
	}
	key := eventKey(gvr.Resource, ns, name, rv, rv == "")
	if rv == "" {
		key = eventKey(gvr.Resource, ns, name, old, true)
	}
	due := f.lag.clock.Now().Add(f.lag.delay)
	f.lag.due[key] = due
	f.lag.pending = append(f.lag.pending, pendingWrite{gvr: gvr, ns: ns, name: name, rv: rv, key: key, due: due})
	f.promote()
}

// promote runs the TTL controller and applies the pending writes that
// are due (f.mu held).
func (f *Fake) promote() {
	if len(f.lag.expiries) > 0 && !f.lag.expiring {
		f.lag.expiring = true
		f.expire()
		f.lag.expiring = false
	}
	if len(f.lag.pending) == 0 {
		return
	}
	now := f.lag.clock.Now()
	n := 0
	for _, p := range f.lag.pending {
		if p.due.After(now) {
			break
		}
		f.apply(p.gvr, p.ns, p.name, p.rv)
		// A watch that looks for it later finds no due time: due already.
		delete(f.lag.due, p.key)
		n++
	}
	if n > 0 {
		f.lag.pending = append(f.lag.pending[:0], f.lag.pending[n:]...)
		// A watch waiting for an event now due looks again (a timer on a
		// fake clock set after the clock moved would fire late).
		close(f.lag.wake)
		f.lag.wake = make(chan struct{})
	}
}

// flush makes every pending write due now (f.mu held): an informer's
// list (resourceVersion "0", served from the API server's watch cache)
// shows the state the informer then watches from, so Settle's truth and
// every watch catch up with it.
func (f *Fake) flush() {
	if len(f.lag.pending) == 0 {
		return
	}
	now := f.lag.clock.Now()
	for i := range f.lag.pending {
		f.lag.pending[i].due = now
		f.lag.due[f.lag.pending[i].key] = now
	}
	f.promote()
}

// flushOnInformerList is the reaction that flushes the lag before an
// informer's list.
func (f *Fake) flushOnInformerList(a k8stesting.Action) (bool, runtime.Object, error) {
	if la, ok := a.(k8stesting.ListActionImpl); ok && la.ListOptions.ResourceVersion == "0" {
		f.mu.Lock()
		f.flush()
		f.mu.Unlock()
	}
	return false, nil, nil
}

// NextDue is when the next write still on its way reaches the informers.
func (f *Fake) NextDue() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promote()
	if len(f.lag.pending) == 0 {
		return time.Time{}, false
	}
	return f.lag.pending[0].due, true
}

// RealLag is how long until the last write on its way reaches the
// informers when the fake runs on the real clock (Fake.NewCluster); 0 on a
// fake clock, whose time only its owner moves.
func (f *Fake) RealLag() time.Duration {
	if _, real := f.lag.clock.(clock.RealClock); !real {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promote()
	if len(f.lag.pending) == 0 {
		return 0
	}
	return time.Until(f.lag.pending[len(f.lag.pending)-1].due) + time.Millisecond
}

func (f *Fake) dueOf(resource string, ev watch.Event) (time.Time, <-chan struct{}, bool) {
	if ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
		return time.Time{}, nil, false
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return time.Time{}, nil, false
	}
	key := eventKey(resource, m.GetNamespace(), m.GetName(), m.GetResourceVersion(), ev.Type == watch.Deleted)
	f.mu.Lock()
	defer f.mu.Unlock()
	due, ok := f.lag.due[key]
	return due, f.lag.wake, ok
}

// delayed holds each event of w until it is due.
func (f *Fake) delayed(gvr schema.GroupVersionResource, w watch.Interface) watch.Interface {
	if f.lag.delay < 0 {
		return w
	}
	d := &delayedWatch{in: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go d.run(f, gvr.Resource)
	return d
}

type delayedWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (d *delayedWatch) Stop() {
	d.once.Do(func() {
		close(d.stop)
		d.in.Stop()
	})
}

func (d *delayedWatch) ResultChan() <-chan watch.Event { return d.out }

func (d *delayedWatch) run(f *Fake, resource string) {
	defer close(d.out)
	for {
		var ev watch.Event
		select {
		case e, ok := <-d.in.ResultChan():
			if !ok {
				return
			}
			ev = e
		case <-d.stop:
			return
		}
		for {
			due, wake, ok := f.dueOf(resource, ev)
			now := f.lag.clock.Now()
			if !ok || !now.Before(due) {
				break
			}
			select {
			case <-f.lag.clock.After(due.Sub(now)):
			case <-wake:
			case <-d.stop:
				return
			}
		}
		select {
		case d.out <- ev:
		case <-d.stop:
			return
		}
	}
}

// refuseStale is the API server's optimistic concurrency: an update that
// names a resourceVersion other than the stored one is a Conflict.
func (t *stampTracker) refuseStale(gvr schema.GroupVersionResource, ns string, m metav1.Object) error {
	want := m.GetResourceVersion()
	if want == "" {
		return nil
	}
	cur, err := t.ObjectTracker.Get(gvr, ns, m.GetName())
	if err != nil {
		return nil // the write itself reports NotFound
	}
	cm, err := meta.Accessor(cur)
	if err != nil || cm.GetResourceVersion() == want {
		return nil
	}
	return apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
		fmt.Errorf("the object has been modified (resourceVersion %s, stored %s); please apply your changes to the latest version and try again", want, cm.GetResourceVersion()))
}

// refuseInvalidName is the API server's validation of a created object's
// name: a DNS-1123 subdomain, and for a Job a label value too (the Job
// controller labels its pods with it).
func (f *Fake) refuseInvalidName(a k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := a.(k8stesting.CreateAction)
	if !ok || a.GetSubresource() != "" {
		return false, nil, nil
	}
	m, err := meta.Accessor(ca.GetObject())
	if err != nil {
		return false, nil, nil
	}
	name := m.GetName()
	if name == "" && m.GetGenerateName() != "" {
		return false, nil, nil
	}
	msgs := validation.IsDNS1123Subdomain(name)
	if a.GetResource().Resource == "jobs" {
		msgs = append(msgs, validation.IsValidLabelValue(name)...)
	}
	if len(msgs) == 0 {
		return false, nil, nil
	}
	gr := a.GetResource().GroupResource()
	kind := schema.GroupKind{Group: gr.Group, Kind: strings.TrimSuffix(gr.Resource, "s")}
	return true, nil, apierrors.NewInvalid(kind, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name, strings.Join(msgs, "; "))})
}

// expireFinished hands a finished Job with ttlSecondsAfterFinished to
// the TTL controller: it is deleted that long after (on the fake's clock),
// unless it changed or was deleted since.
func (f *Fake) expireFinished(j *batchv1.Job) {
	if !f.lag.ttl || j.Spec.TTLSecondsAfterFinished == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lag.expiries = append(f.lag.expiries, expiry{
		ns: j.Namespace, name: j.Name, rv: j.ResourceVersion,
		at: f.lag.clock.Now().Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second),
	})
	slices.SortStableFunc(f.lag.expiries, func(a, b expiry) int { return a.at.Compare(b.at) })
}

// expire is the TTL controller's pass (f.mu held): it runs whenever the
// fake is used (every client call, Versions, Settle), so on a fake clock
// a Job expires at the first look after the clock passed its time.
func (f *Fake) expire() {
	now := f.lag.clock.Now()
	n := 0
	for _, x := range f.lag.expiries {
		if x.at.After(now) {
			break
		}
		n++
		obj, err := f.tracker.ObjectTracker.Get(jobsGVR, x.ns, x.name)
		if err != nil || obj.(*batchv1.Job).ResourceVersion != x.rv {
			continue
		}
		if err := f.tracker.ObjectTracker.Delete(jobsGVR, x.ns, x.name); err == nil {
			f.written(jobsGVR, x.ns, x.name, "", x.rv)
		}
	}
	if n > 0 {
		f.lag.expiries = append(f.lag.expiries[:0], f.lag.expiries[n:]...)
	}
}

// tick runs the fake's controllers before a client call.
func (f *Fake) tick(k8stesting.Action) (bool, runtime.Object, error) {
	f.mu.Lock()
	f.promote()
	f.mu.Unlock()
	return false, nil, nil
}
