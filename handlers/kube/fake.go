package kube

import (
	"cmp"
	"slices"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	fakeappsv1 "k8s.io/client-go/kubernetes/typed/apps/v1/fake"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	fakebatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	fakecoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	fakecorev1 "k8s.io/client-go/kubernetes/typed/core/v1/fake"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	fakeeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1/fake"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	fakepolicyv1 "k8s.io/client-go/kubernetes/typed/policy/v1/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Fake is a Client of client-go's fake typed clients over one object
// tracker, as client-go's fake clientset builds them for every API group
// (NewSimpleClientset) but for Client's six only (see Client). Its tracker
// stamps a resourceVersion on every write and remembers the newest one of
// every Node and Job, so a Cluster over it can wait until its informer
// caches have caught up (Fake.NewCluster, Cluster.Settle).
// The fake tracker sets no resourceVersions by itself.
type Fake struct {
	k8stesting.Fake

	mu    sync.Mutex
	rv    uint64
	nodes map[string]string
	jobs  map[string]string // "<ns>/<name>"
	// work: the workload resources the built-in scaler lists, by resource,
	// "<ns>/<name>" -> resourceVersion.
	work map[string]map[string]string
	// gen counts the writes and deletes of stamped objects; versionsAt
	// holds the copies Versions and WorkVersions last made, by namespace
	// ("" for WorkVersions), and the gen they were made at. Settle asks
	// for them many times between two writes (a replayed week, millions of
	// times), so an unchanged cluster is not copied again.
	gen        uint64
	versionsAt map[string]versionsCopy
	// changes are the writes and deletes after gen changesFrom, in order
	// (ChangesSince), at most maxFakeChanges of them.
	changes     []Change
	changesFrom uint64

	tracker *stampTracker
	lag     lag
}

type versionsCopy struct {
	gen         uint64
	nodes, jobs map[string]string
	work        map[string]map[string]string
}

// fakeWatchBuffer is how many events a fake watch holds before the fake
// clientset panics ("channel full"): its default of 100 is overrun by a
// simulated pool under churn (100 claims a second) whenever the informers
// fall behind for a moment. It is process-wide (watch.DefaultChanSize) and
// only client-go's fakes read it.
const fakeWatchBuffer = 1 << 14

var widenFakeWatches sync.Once

// NewFake returns an empty fake cluster with the default FakeOptions: its
// informers lag DefaultWatchDelay behind its writes on the real clock, and
// its TTL controller runs.
func NewFake() *Fake { return NewFakeWith(FakeOptions{}) }

// NewFakeWith returns an empty fake cluster.
func NewFakeWith(opts FakeOptions) *Fake {
	widenFakeWatches.Do(func() {
		if watch.DefaultChanSize < fakeWatchBuffer {
			watch.DefaultChanSize = fakeWatchBuffer
		}
	})
	// The simple tracker, as NewSimpleClientset's: NewClientset's
	// field-managed one slows every write as the objects grow (a
	// 10,000-slot pool cannot run on it), and nothing here applies
	// server-side patches.
	f := &Fake{nodes: map[string]string{}, jobs: map[string]string{}, work: map[string]map[string]string{}, versionsAt: map[string]versionsCopy{}}
	f.lag = newLag(opts)
	t := &stampTracker{ObjectTracker: k8stesting.NewObjectTracker(fakeScheme, fakeCodecs.UniversalDecoder()), f: f}
	f.tracker = t
	f.AddReactor("*", "*", f.tick)
	f.AddReactor("list", "*", f.flushOnInformerList)
	f.AddReactor("create", "*", f.refuseInvalidName)
	f.AddReactor("*", "*", k8stesting.ObjectReaction(t))
	f.AddWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := t.Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		return true, f.delayed(a.GetResource(), w), nil
	})
	f.PrependReactor("create", "pods", f.evictionReaction)
	return f
}

// fakeScheme holds the kinds of Client's groups, the objects the fake
// tracker stores.
var fakeScheme, fakeCodecs = func() (*runtime.Scheme, serializer.CodecFactory) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, batchv1.AddToScheme, appsv1.AddToScheme, coordinationv1.AddToScheme, policyv1.AddToScheme, eventsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // the API types' own registrations: cannot fail
		}
	}
	return s, serializer.NewCodecFactory(s)
}()

// Tracker is the object tracker the fake clients read and write.
func (f *Fake) Tracker() k8stesting.ObjectTracker { return f.tracker }

// IsWatchListSemanticsUnSupported tells client-go's reflectors, as
// client-go's fake clientset does, to list and then watch: the fake serves
// no watch-list streams.
func (f *Fake) IsWatchListSemanticsUnSupported() bool { return true }

func (f *Fake) CoreV1() corev1client.CoreV1Interface { return &fakecorev1.FakeCoreV1{Fake: &f.Fake} }
func (f *Fake) BatchV1() batchv1client.BatchV1Interface {
	return &fakebatchv1.FakeBatchV1{Fake: &f.Fake}
}
func (f *Fake) AppsV1() appsv1client.AppsV1Interface { return &fakeappsv1.FakeAppsV1{Fake: &f.Fake} }
func (f *Fake) PolicyV1() policyv1client.PolicyV1Interface {
	return &fakepolicyv1.FakePolicyV1{Fake: &f.Fake}
}
func (f *Fake) EventsV1() eventsv1client.EventsV1Interface {
	return &fakeeventsv1.FakeEventsV1{Fake: &f.Fake}
}
func (f *Fake) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return &fakecoordinationv1.FakeCoordinationV1{Fake: &f.Fake}
}

// Versions returns the newest resourceVersion of every Node and of every
// Job of namespace ns (keyed by name) whose watch event is due
// (FakeOptions.WatchDelay). The maps are shared with later
// calls until the next write: read them, never change them.
func (f *Fake) Versions(ns string) func() (map[string]string, map[string]string) {
	key := "ns/" + ns
	return func() (map[string]string, map[string]string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.promote()
		if c, ok := f.versionsAt[key]; ok && c.gen == f.gen {
			return c.nodes, c.jobs
		}
		nodes := make(map[string]string, len(f.nodes))
		for k, v := range f.nodes {
			nodes[k] = v
		}
		jobs := map[string]string{}
		prefix := ns + "/"
		for k, v := range f.jobs {
			if len(k) > len(prefix) && k[:len(prefix)] == prefix {
				jobs[k[len(prefix):]] = v
			}
		}
		f.versionsAt[key] = versionsCopy{gen: f.gen, nodes: nodes, jobs: jobs}
		return nodes, jobs
	}
}

// Generation counts the writes and deletes of the objects Versions and
// WorkVersions follow (Fake.NewCluster).
func (f *Fake) Generation() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promote()
	return f.gen
}

// WorkVersions returns the newest resourceVersion of every workload object
// the built-in scaler lists (Fake.NewCluster), Jobs of every namespace
// included. The map is shared like Versions'.
func (f *Fake) WorkVersions() map[string]map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promote()
	if c, ok := f.versionsAt["work"]; ok && c.gen == f.gen {
		return c.work
	}
	out := map[string]map[string]string{"jobs": {}}
	for _, res := range workResources {
		out[res] = map[string]string{}
		for k, v := range f.work[res] {
			out[res][k] = v
		}
	}
	for k, v := range f.jobs {
		out["jobs"][k] = v
	}
	f.versionsAt["work"] = versionsCopy{gen: f.gen, work: out}
	return out
}

var (
	nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")
	jobsGVR  = batchv1.SchemeGroupVersion.WithResource("jobs")
)

// workResources are the stamped resources besides Nodes and Jobs.
var workResources = []string{"pods", "deployments", "statefulsets", "daemonsets", "replicasets"}

func workResource(gvr schema.GroupVersionResource) bool {
	return (gvr.Group == "" || gvr.Group == "apps") && slices.Contains(workResources, gvr.Resource)
}

type stampTracker struct {
	k8stesting.ObjectTracker
	f *Fake
}

// stamp sets the next resourceVersion on obj and writes it. obj is the
// caller's own (owned): the object reactions hand the tracker their
// action's private copy, so only Add, whose object is its caller's, copies
// it first (a copy of every Job written would cost a replay's runs a share
// of their CPU for nothing).
func (t *stampTracker) stamp(gvr schema.GroupVersionResource, obj runtime.Object, ns string, owned, update bool, write func(runtime.Object) error) error {
	if gvr != nodesGVR && gvr != jobsGVR && !workResource(gvr) {
		return write(obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return write(obj)
	}
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if ns == "" {
		ns = m.GetNamespace()
	}
	if !owned {
		obj = obj.DeepCopyObject()
		m, _ = meta.Accessor(obj)
	}
	if update {
		if err := t.refuseStale(gvr, ns, m); err != nil {
			return err
		}
	}
	t.f.rv++
	rv := strconv.FormatUint(t.f.rv, 10)
	m.SetResourceVersion(rv)
	if err := write(obj); err != nil {
		return err
	}
	t.f.written(gvr, ns, m.GetName(), rv, "")
	return nil
}

func (t *stampTracker) Add(obj runtime.Object) error {
	gvks, _, err := fakeScheme.ObjectKinds(obj)
	if err == nil && len(gvks) > 0 {
		gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
		m, _ := meta.Accessor(obj)
		return t.stamp(gvr, obj, m.GetNamespace(), false, false, func(o runtime.Object) error { return t.ObjectTracker.Add(o) })
	}
	return t.ObjectTracker.Add(obj)
}

func (t *stampTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	return t.stamp(gvr, obj, ns, true, false, func(o runtime.Object) error { return t.ObjectTracker.Create(gvr, o, ns, opts...) })
}

func (t *stampTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	return t.stamp(gvr, obj, ns, true, true, func(o runtime.Object) error { return t.ObjectTracker.Update(gvr, o, ns, opts...) })
}

func (t *stampTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	return t.stamp(gvr, obj, ns, true, false, func(o runtime.Object) error { return t.ObjectTracker.Patch(gvr, o, ns, opts...) })
}

func (t *stampTracker) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	if gvr != nodesGVR && gvr != jobsGVR && !workResource(gvr) {
		return t.ObjectTracker.Delete(gvr, ns, name, opts...)
	}
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	old := ""
	if o, err := t.ObjectTracker.Get(gvr, ns, name); err == nil {
		if m, err := meta.Accessor(o); err == nil {
			old = m.GetResourceVersion()
		}
	}
	if err := t.ObjectTracker.Delete(gvr, ns, name, opts...); err != nil {
		return err
	}
	t.f.written(gvr, ns, name, "", old)
	return nil
}

// apply makes one write (rv) or delete (rv "") known to Versions, the
// change log and Generation (f.mu held): when its watch event is due.
func (f *Fake) apply(gvr schema.GroupVersionResource, ns, name, rv string) {
	f.gen++
	f.changed(gvr, ns, name, rv)
	switch {
	case gvr == nodesGVR && rv == "":
		delete(f.nodes, name)
	case gvr == nodesGVR:
		f.nodes[name] = rv
	case gvr == jobsGVR && rv == "":
		delete(f.jobs, ns+"/"+name)
	case gvr == jobsGVR:
		f.jobs[ns+"/"+name] = rv
	case rv == "":
		delete(f.work[gvr.Resource], ns+"/"+name)
	default:
		if f.work[gvr.Resource] == nil {
			f.work[gvr.Resource] = map[string]string{}
		}
		f.work[gvr.Resource][ns+"/"+name] = rv
	}
}

// Change is one write (Version is the object's new resourceVersion) or
// delete (Version "") of a Node, Job or workload object the Fake stamps.
type Change struct {
	// Cache is "nodes", "jobs" or a workload resource ("pods", ...).
	Cache string
	// Key is the name of a Node, "<ns>/<name>" of anything else.
	Key     string
	Version string
	gen     uint64
}

// maxFakeChanges bounds the Fake's change log: a reader further behind
// than that compares every object instead (Cluster.Settle).
const maxFakeChanges = 1 << 15

// changed logs one write or delete (f.mu held, f.gen already counted it).
func (f *Fake) changed(gvr schema.GroupVersionResource, ns, name, rv string) {
	ch := Change{Cache: gvr.Resource, Key: name, Version: rv, gen: f.gen}
	if gvr != nodesGVR {
		ch.Key = ns + "/" + name
	}
	if len(f.changes) >= maxFakeChanges {
		drop := len(f.changes) / 2
		f.changesFrom = f.changes[drop-1].gen
		f.changes = slices.Delete(f.changes, 0, drop)
	}
	f.changes = append(f.changes, ch)
}

// ChangesSince returns the writes and deletes counted after generation
// gen (Fake.NewCluster), in order; ok is false when the log no longer
// reaches back that far.
func (f *Fake) ChangesSince(gen uint64) (changes []Change, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promote()
	if gen < f.changesFrom {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(f.changes, gen+1, func(c Change, g uint64) int { return cmp.Compare(c.gen, g) })
	return slices.Clone(f.changes[i:]), true
}
