package handlers_test

import (
	"context"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

func TestBootCreatesOneLabelledStartupJob(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{Lifecycle: events.Lifecycle{StartupJobTimeout: events.Duration(3 * 60e9)}}, false, "a.lan")
	e.increase("g", 1)
	e.passes()
	e.passes() // a second pass writes nothing and creates nothing
	c := e.claim("a.lan")
	if c.Phase != projections.PhaseBooting || c.Attempt != 1 || c.StartupJob != decide.JobName(c.Name, "start", 1) {
		t.Fatalf("claim: %s attempt %d job %s", c.Phase, c.Attempt, c.StartupJob)
	}
	list, _ := e.f.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("%d Jobs", len(list.Items))
	}
	j := list.Items[0]
	want := map[string]string{handlers.LabelClaim: c.Name, handlers.LabelSlot: "a.lan", handlers.LabelAttempt: "1", handlers.LabelOperation: decide.OperationStartup}
	for k, v := range want {
		if j.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, j.Labels[k], v)
		}
	}
	checkJobShape(t, &j, 180, c.Name)
}

func checkJobShape(t *testing.T, j *batchv1.Job, deadline int64, claim string) {
	t.Helper()
	if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != deadline || j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 {
		t.Errorf("deadline/backoff: %v %v", j.Spec.ActiveDeadlineSeconds, j.Spec.BackoffLimit)
	}
	if len(j.OwnerReferences) != 0 || j.Spec.Template.Spec.RestartPolicy != "Never" {
		t.Errorf("owners %v, restartPolicy %s", j.OwnerReferences, j.Spec.Template.Spec.RestartPolicy)
	}
	env := map[string]string{}
	for _, v := range j.Spec.Template.Spec.Containers[0].Env {
		env[v.Name] = v.Value
	}
	if env[handlers.EnvClaim] != claim || env[handlers.EnvSlot] == "" || env[handlers.EnvProviderID] == "" || env[handlers.EnvOperation] == "" {
		t.Errorf("env %v", env)
	}
}

func TestBootAlreadyExistsIsSuccess(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.increase("g", 1)
	c := e.claim("a")
	// Someone (a previous process) created the Job already.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: decide.JobName(c.Name, "start", 1), Namespace: ns, Labels: map[string]string{handlers.LabelClaim: c.Name}}}
	if _, err := e.f.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.passes()
	if c := e.claim("a"); c.Phase != projections.PhaseBooting || len(e.jobs()) != 1 {
		t.Fatalf("%s, %d jobs", c.Phase, len(e.jobs()))
	}
}

func TestBootWithoutStartupSpecFails(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, true, "a")
	e.increase("g", 1)
	e.passes()
	c := e.claim("a")
	if c.Phase != projections.PhaseFailed || c.Reason != projections.ReasonStartupJobFailed || len(e.jobs()) != 0 {
		t.Fatalf("%s/%s %q, jobs %v", c.Phase, c.Reason, c.Message, e.jobs())
	}
}

func TestBootAttemptBound(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	for i := 1; i <= 3; i++ {
		e.increase("g", 1)
		e.passes()
		c := e.claim("a")
		if c.Attempt != i || c.StartupJob != decide.JobName(c.Name, "start", i) {
			t.Fatalf("claim %d: attempt %d job %s", i, c.Attempt, c.StartupJob)
		}
		e.finishJob(c.StartupJob, false, "BackoffLimitExceeded")
		e.passes()
		if c := e.claim("a"); c.Phase != projections.PhaseFailed {
			t.Fatalf("claim %d: %s", i, c.Phase)
		}
		// Let the force shutdown finish before the next claim.
		for name := range e.jobs() {
			if name == decide.JobName(c.Name, "stop", 1) {
				e.finishJob(name, true, "")
			}
		}
	}
	// A 4th claim by hand on the resting slot is refused; none boots a 4th time.
	if _, err := e.h.Exec(decide.ManualClaim{Slot: "a", By: "op"}); decide.CodeOf(err) != decide.CodeFailedPrecondition {
		t.Fatalf("4th claim: %v", err)
	}
	n := 0
	for name := range e.jobs() {
		if len(name) > 8 && name[len(name)-8:len(name)-1] == "-start-" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d startup Jobs, want 3 (%v)", n, e.jobs())
	}
	_ = strconv.Itoa
}

func TestBootWaitsForAShutdownInFlight(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.increase("g", 1)
	e.passes()
	c := e.claim("a")
	e.finishJob(c.StartupJob, false, "BackoffLimitExceeded")
	e.passes() // failed, force shutdown running
	e.increase("g", 1)
	e.passes()
	if c2 := e.claim("a"); c2.Phase != projections.PhasePending {
		t.Fatalf("booted while the power-off runs: %s", c2.Phase)
	}
	e.finishJob(decide.JobName(c.Name, "stop", 1), true, "")
	e.passes()
	if c2 := e.claim("a"); c2.Phase != projections.PhaseBooting || c2.Attempt != 2 {
		t.Fatalf("after the power-off: %s attempt %d", c2.Phase, c2.Attempt)
	}
}
