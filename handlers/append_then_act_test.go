package handlers_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
)

// actionLog is the reactors' Cluster in the reactor tests: it passes every
// call on, and records each change (cordon, Job create, Node delete,
// eviction, pod delete) with the events the log held at the moment of the
// call, read from the store itself. A side effect made before its event
// landed shows as an action whose log lacks that event.
type actionLog struct {
	handlers.Cluster
	store *eventlog.Store

	mu   sync.Mutex
	acts []action
	// failCordon makes the cordon of these nodes fail (a fault to survive).
	failCordon map[string]error
}

type action struct {
	verb, target string
	// by is the reactor's file that made the call.
	by string
	// logged are the events in the log when the call was made.
	logged []events.Event
}

func (a *actionLog) record(verb, target string) {
	var logged []events.Event
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := a.store.LastSeq(ctx)
	if err == nil && last > 0 {
		err = a.store.Read(ctx, 1, last, func(e events.Event) error { logged = append(logged, e); return nil })
	}
	if err != nil {
		panic(fmt.Sprintf("read the log at %s %s: %v", verb, target, err))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acts = append(a.acts, action{verb: verb, target: target, by: callerFile(), logged: logged})
}

// callerFile is the file of package handlers that asked for the action
// (past the shared helpers of reactor.go), or refusal for the refusal of
// a host (refuseNode).
func callerFile() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		base := filepath.Base(f.File)
		if strings.HasSuffix(f.Function, "/handlers.refuseNode") {
			return refusal
		}
		if strings.Contains(f.Function, "/handlers.") && !strings.HasSuffix(base, "_test.go") && base != "reactor.go" && base != "controller.go" {
			return base
		}
		if !more {
			return ""
		}
	}
}

func (a *actionLog) Cordon(ctx context.Context, node string) error {
	a.record("cordon", node)
	a.mu.Lock()
	err := a.failCordon[node]
	a.mu.Unlock()
	if err != nil {
		return err
	}
	return a.Cluster.Cordon(ctx, node)
}

func (a *actionLog) CreateJob(ctx context.Context, req handlers.JobRequest) (bool, error) {
	a.record("createJob", req.Name)
	return a.Cluster.CreateJob(ctx, req)
}

func (a *actionLog) DeleteJob(ctx context.Context, name string) error {
	a.record("deleteJob", name)
	return a.Cluster.DeleteJob(ctx, name)
}

func (a *actionLog) DeleteNode(ctx context.Context, node string) error {
	a.record("deleteNode", node)
	return a.Cluster.DeleteNode(ctx, node)
}

func (a *actionLog) Evict(ctx context.Context, p handlers.PodView) error {
	a.record("evict", p.Key())
	return a.Cluster.Evict(ctx, p)
}

func (a *actionLog) DeletePod(ctx context.Context, p handlers.PodView) error {
	a.record("deletePod", p.Key())
	return a.Cluster.DeletePod(ctx, p)
}

// refusal is the by of an action the refusal of a host made.
const refusal = "refuseNode"

// of lists the recorded actions of one verb. The refusal of a host is left
// out: its cordon follows HostJoinRefused, which
// TestRefusalIsAppendedBeforeTheNodeIsTouched checks.
func (a *actionLog) of(verb string) []action {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []action
	for _, x := range a.acts {
		if x.verb == verb && x.by != refusal {
			out = append(out, x)
		}
	}
	return out
}

// mustFollow fails unless at least one action of verb was made and every
// one of them was made with an event in the log that decides it (decided
// reports whether an event names the action's target).
func mustFollow(t *testing.T, acts []action, verb string, decided func(target string, e events.Event) bool) {
	t.Helper()
	if len(acts) == 0 {
		t.Fatalf("no %s was made", verb)
	}
	for _, x := range acts {
		if !slices.ContainsFunc(x.logged, func(e events.Event) bool { return e.Data != nil && decided(x.target, e) }) {
			var types []events.Type
			for _, e := range x.logged {
				types = append(types, e.Type)
			}
			t.Fatalf("%s %s (by %s) was made before the event that decides it was in the log (log: %v)", verb, x.target, x.by, types)
		}
	}
}

// by keeps the actions one reactor's file made.
func by(acts []action, file string) []action {
	var out []action
	for _, x := range acts {
		if x.by == file {
			out = append(out, x)
		}
	}
	return out
}

// onSlot is an event of one type on the slot target.
func onSlot(typ events.Type) func(string, events.Event) bool {
	return func(target string, e events.Event) bool {
		return e.Type == typ && e.Data.Reference().Slot == target
	}
}

func TestInputLawRecordsItsShutdownBeforeCordonAndJob(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.register("a", true) // up, no claim
	e.passes()
	mustFollow(t, e.acts.of("cordon"), "cordon", onSlot(events.TypeShutdownFired))
	mustFollow(t, e.acts.of("createJob"), "createJob", func(job string, e events.Event) bool {
		d, ok := e.Data.(events.ShutdownFired)
		return ok && d.Job == job
	})
}

func TestForceShutdownRecordsBeforeCordonAndJob(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	c := e.bootToReady("g", "a")
	e.h.MustExec(decide.FailClaim{Claim: c.Name, Reason: "MachineGone", ForceShutdown: true})
	e.passes()
	mustFollow(t, e.acts.of("cordon"), "cordon", onSlot(events.TypeShutdownFired))
	mustFollow(t, e.acts.of("createJob"), "createJob", func(job string, e events.Event) bool {
		switch d := e.Data.(type) {
		case events.ShutdownFired:
			return d.Job == job
		case events.ClaimBooting:
			return d.StartupJob == job
		}
		return false
	})
}

// TestInputLawPauseIsRecorded: three claimless shutdowns that do not power
// the machine off pause the input law, and the pause is an event (the
// alert a scale-down's ShutdownAttemptLimitReached is), written once.
func TestInputLawPauseIsRecorded(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.register("a", true)
	e.passes()
	for range 5 {
		for j := range e.jobs() {
			e.finishJob(j, true, "")
		}
		e.step(handlers.ShutdownSettle)
		e.passes()
	}
	var paused []events.UnclaimedShutdownPaused
	var fired []events.Event
	if err := e.h.Store.ReadAggregate(context.Background(), events.SlotAggregate("a"), func(ev events.Event) error {
		switch d := ev.Data.(type) {
		case events.UnclaimedShutdownPaused:
			paused = append(paused, d)
		case events.ShutdownFired:
			fired = append(fired, ev)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(fired) != 3 || len(paused) != 1 {
		t.Fatalf("%d shutdowns and %d pauses recorded, want 3 and 1", len(fired), len(paused))
	}
	if want := fired[2].Time.Add(30 * time.Minute); paused[0].Attempts != 3 || !paused[0].PausedUntil.Equal(want) {
		t.Fatalf("pause %+v, want 3 attempts until %s", paused[0], want)
	}
	if sl := e.slot("a"); sl.ShutdownPausedUntil == nil || !sl.ShutdownPausedUntil.Equal(paused[0].PausedUntil) {
		t.Fatalf("slot's pause %v, want %s", sl.ShutdownPausedUntil, paused[0].PausedUntil)
	}
	// Past the pause the law fires again, and the next pause is recorded again.
	e.step(30 * time.Minute)
	e.passes()
	if sl := e.slot("a"); sl.ShutdownPausedUntil != nil || sl.LastShutdown.Attempt != 1 {
		t.Fatalf("after the pause: paused %v, last shutdown %+v", sl.ShutdownPausedUntil, sl.LastShutdown)
	}
}

func TestNodeCleanupRecordsTheDeleteBeforeIt(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.register("a", true)
	e.passes()
	for j := range e.jobs() {
		e.finishJob(j, true, "")
	}
	e.setReady("a", false) // the shutdown landed: the kubelet stopped posting
	e.passes()
	if _, ok := e.cl.Node("a"); ok {
		t.Fatal("the NotReady node of the powered-off machine was not deleted")
	}
	mustFollow(t, e.acts.of("deleteNode"), "deleteNode", func(node string, e events.Event) bool {
		d, ok := e.Data.(events.NodeDeleteRequested)
		return ok && d.Node == node
	})
	if n := len(e.acts.of("deleteNode")); n != 1 {
		t.Fatalf("%d Node deletes, want 1", n)
	}
}

// runPod puts a running pod labelled app=<namespace> on node in the fake
// clientset.
func (e *renv) runPod(namespace, name, node string) {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": namespace}}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := e.f.CoreV1().Pods(namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// blockEvictions adds a PodDisruptionBudget that allows no disruption of
// the namespace's app=<namespace> pods.
func (e *renv) blockEvictions(namespace string) {
	e.t.Helper()
	zero := intstr.FromInt32(0)
	if _, err := e.f.PolicyV1().PodDisruptionBudgets(namespace).Create(context.Background(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: namespace, Namespace: namespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": namespace}}},
	}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestDrainRecordsBeforeCordonEvictAndDelete: the cordon and evictions
// follow DrainStarted, which lists the pods; the force deletes follow
// DrainTimedOut, which lists them too.
func TestDrainRecordsBeforeCordonEvictAndDelete(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{DrainTimeout: events.Duration(time.Minute), OnDrainTimeout: events.DrainForce}, false, "a")
	e.bootToReady("g", "a")
	e.runPod("web", "web-0", "a")
	e.blockEvictions("web") // a budget that allows no eviction
	e.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	e.passes()
	e.step(time.Minute + time.Second)
	e.passes()
	listed := func(field func(events.Data) ([]string, bool)) func(string, events.Event) bool {
		return func(pod string, e events.Event) bool {
			pods, ok := field(e.Data)
			return ok && slices.Contains(pods, pod)
		}
	}
	mustFollow(t, by(e.acts.of("cordon"), "drain.go"), "cordon", onSlot(events.TypeDrainStarted))
	mustFollow(t, e.acts.of("evict"), "evict", listed(func(d events.Data) ([]string, bool) {
		x, ok := d.(events.DrainStarted)
		return x.Pods, ok
	}))
	mustFollow(t, e.acts.of("deletePod"), "deletePod", listed(func(d events.Data) ([]string, bool) {
		x, ok := d.(events.DrainTimedOut)
		return x.Remaining, ok && x.Policy == events.DrainForce
	}))
}
