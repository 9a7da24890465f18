package kube_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/projections"
)

type statusEnv struct {
	h      *handlerstest.Harness
	f      *kube.Fake
	writes atomic.Int32

	mu sync.Mutex
	at []time.Time // each write's time on the fake clock
}

// writtenAt is the fake clock's time at each write so far.
func (e *statusEnv) writtenAt() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.at)
}

func newStatusEnv(t *testing.T, interval time.Duration) *statusEnv {
	t.Helper()
	e := &statusEnv{h: handlerstest.New(t), f: kube.NewFake()}
	e.f.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			e.writes.Add(1)
			e.mu.Lock()
			e.at = append(e.at, e.h.Clock.Now())
			e.mu.Unlock()
		}
		return false, nil, nil
	})
	e.h.Declare("g", events.GroupSpec{MinSize: 1}, "a", "b", "c")
	e.h.Declare("auto", events.GroupSpec{Scaler: events.ScalerBuiltin, Builtin: &events.BuiltinScaler{PodsPerNode: 1, MaxNodes: 1}}, "x")
	ctx, cancel := context.WithCancel(context.Background())
	w := kube.NewStatusWriter(kube.StatusWriterConfig{Client: e.f, Namespace: "ns", Views: e.h.Views, Clock: e.h.Clock, Interval: interval, Leader: "claimstream-0", Log: quietLog})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("status writer: %v", err)
		}
	})
	return e
}

func (e *statusEnv) status(t *testing.T) (kube.Status, bool) {
	t.Helper()
	cm, err := e.f.CoreV1().ConfigMaps("ns").Get(context.Background(), kube.StatusConfigMap, metav1.GetOptions{})
	if err != nil {
		return kube.Status{}, false
	}
	var st kube.Status
	if err := yaml.Unmarshal([]byte(cm.Data[kube.StatusKey]), &st); err != nil {
		t.Fatalf("status %q: %v", cm.Data[kube.StatusKey], err)
	}
	if cm.Annotations[kube.StatusUpdatedAnnotation] == "" {
		t.Error("no last-updated annotation")
	}
	return st, true
}

func (e *statusEnv) waitStatus(t *testing.T, what string, ok func(kube.Status) bool) kube.Status {
	t.Helper()
	var st kube.Status
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		var there bool
		st, there = e.status(t)
		if !there || !ok(st) {
			return fmt.Errorf("status not %s: %+v", what, st)
		}
		return nil
	})
	return st
}

// The ConfigMap says, per group, the target, min, max, live and recently
// failed claims, the slots by state and the last decision; and who leads
// at which sequence of the log.
func TestStatusConfigMapContent(t *testing.T) {
	e := newStatusEnv(t, time.Second)
	claims := e.h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "cluster-autoscaler"}).Claims()
	e.h.MustExec(decide.BootClaim{Claim: claims[0]})
	last := e.h.MustExec(decide.FailClaim{Claim: claims[1], Reason: projections.ReasonStartupJobFailed})
	waitForWaiter(t, e.h)
	e.h.Clock.Step(time.Second)
	st := e.waitStatus(t, "at the failure", func(st kube.Status) bool { return st.Seq == last.Last })
	if st.Leader != "claimstream-0" || len(st.Groups) != 2 {
		t.Fatalf("status %+v", st)
	}
	g := st.Groups[1]
	if g.Name != "g" || g.Scaler != "cluster-autoscaler" || g.Target != 1 || g.Min != 1 || g.Max != 3 || g.Live != 1 || g.FailedRecently != 1 {
		t.Errorf("group g: %+v", g)
	}
	if g.Slots["booting"] != 1 || g.Slots["off"] != 2 {
		t.Errorf("group g slots: %v", g.Slots)
	}
	if a := st.Groups[0]; a.Name != "auto" || a.Scaler != "builtin" || a.Slots["off"] != 1 {
		t.Errorf("group auto: %+v", a)
	}
	// The recent failure leaves the window with time alone: once the
	// writer waits on the clock, past the window and one resync.
	waitForWaiter(t, e.h)
	e.h.Clock.Step(projections.RecentFailureWindow + time.Minute)
	e.waitStatus(t, "past the failure window", func(st kube.Status) bool { return st.Groups[1].FailedRecently == 0 })
}

// Changes coalesce: at most one write per interval, on the injected clock.
func TestStatusConfigMapRateBounded(t *testing.T) {
	e := newStatusEnv(t, 10*time.Second)
	e.waitStatus(t, "written at start", func(kube.Status) bool { return true })
	if n := e.writes.Load(); n != 1 {
		t.Fatalf("%d writes at start, want 1", n)
	}
	var last handlers.Result
	for range 3 {
		last = e.h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"})
	}
	// Nine seconds on: still inside the interval, nothing is written; one
	// more second and the three changes are written at once. Each write's
	// time on the fake clock says whether one came inside the interval.
	first := e.writtenAt()[0]
	waitForWaiter(t, e.h)
	e.h.Clock.Step(9 * time.Second)
	waitForWaiter(t, e.h)
	e.h.Clock.Step(time.Second)
	st := e.waitStatus(t, "with the three claims", func(st kube.Status) bool { return st.Seq == last.Last })
	if st.Groups[1].Live != 3 {
		t.Errorf("live %d, want 3", st.Groups[1].Live)
	}
	at := e.writtenAt()
	if len(at) != 2 {
		t.Fatalf("%d writes, want 2: the three changes in one", len(at))
	}
	if got := at[1].Sub(first); got != 10*time.Second {
		t.Fatalf("the second write came %v after the first, want the interval (10s)", got)
	}
}

// A write the API refuses is reported and tried again an interval later.
func TestStatusConfigMapRetriesARefusedWrite(t *testing.T) {
	h := handlerstest.New(t)
	f := kube.NewFake()
	var refuse atomic.Bool
	refuse.Store(true)
	f.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, fmt.Errorf("configmaps is forbidden")
		}
		return false, nil, nil
	})
	fc := &failureCount{}
	ctx, cancel := context.WithCancel(context.Background())
	w := kube.NewStatusWriter(kube.StatusWriterConfig{Client: f, Namespace: "ns", Views: h.Views, Clock: h.Clock, Interval: 5 * time.Second, Leader: "r", Log: quietLog, Metrics: fc})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if fc.get("status") == 0 || !h.Clock.HasWaiters() { // refused, and waiting to retry
			return fmt.Errorf("no failure counted")
		}
		return nil
	})
	refuse.Store(false)
	h.Clock.Step(5 * time.Second)
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		_, err := f.CoreV1().ConfigMaps("ns").Get(context.Background(), kube.StatusConfigMap, metav1.GetOptions{})
		return err
	})
	if n := fc.get("status"); n != 1 {
		t.Errorf("%d failures counted, want 1", n)
	}
}

// waitForWaiter waits until the writer waits on the fake clock (its timer
// is the only waiter: it stops the one it leaves).
func waitForWaiter(t *testing.T, h *handlerstest.Harness) {
	t.Helper()
	eventstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if !h.Clock.HasWaiters() {
			return fmt.Errorf("the status writer does not wait on the clock")
		}
		return nil
	})
}
