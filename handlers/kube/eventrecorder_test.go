package kube_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/projections"
)

// The mapping, event by event: reason (CamelCase), type, the object it is
// recorded on, and a note in words.
func TestEventForEachMove(t *testing.T) {
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	s := projections.NewState()
	s.Slots["s1"] = &projections.Slot{Name: "s1", Group: "g"}
	s.Slots["s2"] = &projections.Slot{Name: "s2", Group: "g", Host: &projections.ExpectedHost{Node: "ip-10-0-0-7"}}
	s.Claims["c1"] = &projections.Claim{Name: "c1", Slot: "s1", Group: "g", RequestedAt: at, RequestedBy: "cluster-autoscaler", StartupJob: "c1-start-1"}
	ref := events.Ref{Claim: "c1", Slot: "s1", Group: "g", Attempt: 1}
	ev := func(d events.Data, after time.Duration) events.Event {
		return events.Event{Type: d.EventType(), Time: at.Add(after), Data: d}
	}
	for _, tc := range []struct {
		event          events.Event
		typ, node, job string
		note           []string
	}{
		{ev(events.ClaimCreated{Ref: ref, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: "IncreaseSize"}, DeadlineAt: at.Add(10 * time.Minute)}, 0),
			"Normal", "s1", "", []string{"requested by cluster-autoscaler through IncreaseSize", "2026-03-04T09:10:00Z"}},
		{ev(events.ClaimBooting{Ref: ref, StartupJob: "c1-start-1"}, time.Second), "Normal", "s1", "c1-start-1", []string{"attempt 1, requested by cluster-autoscaler", "startup Job c1-start-1"}},
		{ev(events.ClaimReady{Ref: ref, Node: "s1"}, 83*time.Second), "Normal", "s1", "c1-start-1", []string{"ready on node s1 1m23s after it was requested"}},
		{ev(events.ClaimFailed{Ref: ref, Reason: "DeadlineExceeded", Message: "deadline passed", ForceShutdown: true}, time.Hour), "Warning", "s1", "c1-start-1", []string{"failed: DeadlineExceeded: deadline passed.", "forced off"}},
		{ev(events.ScaleDownRequested{Ref: ref, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: "DeleteNodes"}, Reason: "ScaledDown"}, time.Hour), "Normal", "s1", "", []string{"scale-down requested by cluster-autoscaler through DeleteNodes (ScaledDown)"}},
		{ev(events.ShutdownFired{Ref: ref, Job: "c1-stop-1", ShutdownAttempt: 1}, time.Hour), "Normal", "s1", "c1-stop-1", []string{"Shutdown Job c1-stop-1 fired for claim c1 (shutdown attempt 1)"}},
		{ev(events.ShutdownFired{Ref: events.Ref{Slot: "s1", Group: "g"}, Job: "s1-stop-x", Force: true}, time.Hour), "Normal", "s1", "s1-stop-x", []string{"a machine no claim wants", "forced"}},
		{ev(events.ShutdownAttemptLimitReached{Ref: ref, Attempts: 3, PausedUntil: at.Add(time.Hour)}, 0), "Warning", "s1", "", []string{"still up after 3 shutdown Jobs", "pause until 2026-03-04T10:00:00Z"}},
		{ev(events.UnclaimedShutdownPaused{Ref: events.Ref{Slot: "s1", Group: "g"}, Attempts: 3, PausedUntil: at}, 0), "Warning", "s1", "", []string{"no claim wants"}},
		{ev(events.HostJoinRefused{Ref: events.Ref{Slot: "s1", Group: "g"}, Node: "stray", Why: "no claim expects it"}, 0), "Warning", "stray", "", []string{"Node stray joined unexpected and was refused: no claim expects it"}},
		{ev(events.DrainTimedOut{Ref: ref, Node: "s1", Policy: "wait", Remaining: []string{"default/web-1"}}, 0), "Warning", "s1", "", []string{"1 pods left: default/web-1; policy wait"}},
		// A slot whose startup Job reported another host: its Node.
		{ev(events.ClaimCreated{Ref: events.Ref{Claim: "c2", Slot: "s2", Group: "g"}, RequestedBy: "x"}, 0), "Normal", "ip-10-0-0-7", "", []string{"slot s2"}},
	} {
		t.Run(string(tc.event.Type), func(t *testing.T) {
			ke, ok := kube.EventFor(s, tc.event)
			if !ok {
				t.Fatal("no Kubernetes Event")
			}
			if ke.Reason != string(tc.event.Type) || ke.Type != tc.typ || ke.Node != tc.node || ke.Job != tc.job || ke.Action == "" {
				t.Errorf("got %+v, want reason %s type %s node %q job %q", ke, tc.event.Type, tc.typ, tc.node, tc.job)
			}
			for _, w := range tc.note {
				if !strings.Contains(ke.Note, w) {
					t.Errorf("note %q lacks %q", ke.Note, w)
				}
			}
		})
	}
	for _, d := range []events.Data{events.NodeObserved{Ref: events.Ref{Slot: "s1"}}, events.GroupDeclared{}, events.ClaimCollected{Ref: ref}} {
		if ke, ok := kube.EventFor(s, events.Event{Type: d.EventType(), Data: d}); ok {
			t.Errorf("%s made a Kubernetes Event: %+v", d.EventType(), ke)
		}
	}
	for _, msg := range []string{strings.Repeat("x", 5000), strings.Repeat("é", 3000)} {
		long := events.ClaimFailed{Ref: ref, Reason: "StartupJobFailed", Message: msg}
		if ke, _ := kube.EventFor(s, ev(long, 0)); len(ke.Note) > 1024 || !utf8.ValidString(ke.Note) || !strings.HasSuffix(ke.Note, "...") {
			t.Errorf("a note of %d bytes (valid UTF-8: %v): the API takes 1kB of text", len(ke.Note), utf8.ValidString(ke.Note))
		}
	}
}

// recorderEnv is the views over a real JetStream log, client-go's fake
// clientset under the kube adapter, and the recorder started on them.
type recorderEnv struct {
	h  *handlerstest.Harness
	f  *kube.Fake
	cl *kube.Cluster
}

func newRecorderEnv(t *testing.T) *recorderEnv {
	t.Helper()
	f, cl := start(t)
	return &recorderEnv{h: handlerstest.New(t), f: f, cl: cl}
}

func (e *recorderEnv) startRecorder(t *testing.T, m kube.EventRecorderMetrics) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := kube.NewEventRecorder(kube.EventRecorderConfig{Client: e.f, Cluster: e.cl, Views: e.h.Views, Log: quietLog, Metrics: m})
	stop, err := r.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); stop() })
}

func (e *recorderEnv) kubeEvents(t *testing.T) []eventsv1.Event {
	t.Helper()
	l, err := e.f.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func (e *recorderEnv) waitEvent(t *testing.T, reason, kind, name string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		for _, ev := range e.kubeEvents(t) {
			if ev.Reason == reason && ev.Regarding.Kind == kind && ev.Regarding.Name == name {
				found = ev
				return nil
			}
		}
		return fmt.Errorf("no %s event on %s %s among %d", reason, kind, name, len(e.kubeEvents(t)))
	})
	return found
}

// A claim driven to ready and one failed, with the recorder running: the
// Events land on the Node when it exists, on the startup Job when it does
// not, and not at all when neither exists; the history before the recorder
// started is never recorded.
func TestEventRecorderRecordsOnTheNodeOrTheJob(t *testing.T) {
	e := newRecorderEnv(t)
	ctx := context.Background()
	e.h.Declare("g", events.GroupSpec{}, "a")
	e.h.Declare("j", events.GroupSpec{}, "j1")
	old := e.h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "history"}).Claims()[0]
	e.h.MustExec(decide.FailClaim{Claim: old, Reason: projections.ReasonDeletedByHand})
	e.h.Clock.Step(time.Hour)

	e.startRecorder(t, nil)
	if err := e.f.RegisterNode(ctx, "a", "homelab://a", nil, e.h.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.cl.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	c := e.h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"}).Claims()[0]
	e.h.MustExec(decide.BootClaim{Claim: c})
	e.h.Clock.Step(90 * time.Second)
	e.h.MustExec(decide.MarkReady{Claim: c, Node: "a"})

	created := e.waitEvent(t, "ClaimCreated", "Node", "a")
	if created.Type != "Normal" || !strings.Contains(created.Note, "requested by cluster-autoscaler") || created.ReportingController != kube.ReportingController || created.Namespace != metav1.NamespaceDefault {
		t.Errorf("ClaimCreated: %+v", created)
	}
	ready := e.waitEvent(t, "ClaimReady", "Node", "a")
	if !strings.Contains(ready.Note, "1m30s after it was requested") {
		t.Errorf("ClaimReady: note %q, regarding %+v", ready.Note, ready.Regarding)
	}
	booting := e.waitEvent(t, "ClaimBooting", "Node", "a")
	if booting.Related == nil || booting.Related.Kind != "Job" || booting.Related.Name != decide.JobName(c, "start", 1) {
		t.Errorf("ClaimBooting on the Node should relate its startup Job: %+v", booting.Related)
	}

	// No Node: the startup Job, or nothing before there is one.
	j := e.h.MustExec(decide.IncreaseSize{Group: "j", Delta: 1, RequestedBy: "cluster-autoscaler"}).Claims()[0]
	e.h.MustExec(decide.BootClaim{Claim: j})
	e.h.MustExec(decide.FailClaim{Claim: j, Reason: projections.ReasonStartupJobFailed, Message: "exit 1"})
	job := decide.JobName(j, "start", 1)
	failed := e.waitEvent(t, "ClaimFailed", "Job", job)
	if failed.Type != "Warning" || failed.Namespace != "ns" || !strings.Contains(failed.Note, "StartupJobFailed: exit 1") {
		t.Errorf("ClaimFailed: %+v", failed)
	}
	e.waitEvent(t, "ClaimBooting", "Job", job)

	for _, ev := range e.kubeEvents(t) {
		if strings.Contains(ev.Note, old) {
			t.Errorf("history recorded: %s %s", ev.Reason, ev.Note)
		}
		if ev.Reason == "ClaimCreated" && strings.Contains(ev.Note, j) {
			t.Errorf("ClaimCreated of a slot with no Node and no Job recorded on %+v", ev.Regarding)
		}
	}
}

type failureCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *failureCount) KubeWriteFailed(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[what]++
}

func (f *failureCount) get(what string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[what]
}

// Events the API refuses (no RBAC) are counted and logged; the claims go on.
func TestEventRecorderReportsRefusedWrites(t *testing.T) {
	e := newRecorderEnv(t)
	e.f.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", fmt.Errorf("RBAC"))
	})
	fc := &failureCount{}
	e.startRecorder(t, fc)
	e.h.Declare("g", events.GroupSpec{}, "a")
	if err := e.f.RegisterNode(context.Background(), "a", "homelab://a", nil, e.h.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.cl.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"})
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if fc.get("event") == 0 {
			return fmt.Errorf("no failure counted")
		}
		return nil
	})
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))
