package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

func TestJobMonitor(t *testing.T) {
	cases := []struct {
		name   string
		act    func(e *renv, job string)
		reason string
	}{
		{"failed", func(e *renv, job string) { e.finishJob(job, false, "BackoffLimitExceeded") }, projections.ReasonStartupJobFailed},
		{"deadline exceeded", func(e *renv, job string) { e.finishJob(job, false, handlers.JobReasonDeadlineExceeded) }, projections.ReasonJobTimeout},
		{"running past the timeout", func(e *renv, job string) {
			e.step(4*time.Minute + 59*time.Second)
			e.passes()
			if c := e.claim("a"); c.Phase != projections.PhaseBooting {
				e.t.Fatalf("failed before the timeout: %s", c.Phase)
			}
			e.step(time.Second)
		}, projections.ReasonJobTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newRenv(t)
			e.declare("g", events.GroupSpec{}, false, "a")
			e.increase("g", 1)
			e.passes()
			c := e.claim("a")
			tc.act(e, c.StartupJob)
			e.passes()
			c = e.claim("a")
			if c.Phase != projections.PhaseFailed || c.Reason != tc.reason || !c.ForceShutdown {
				t.Fatalf("%s/%s force=%t", c.Phase, c.Reason, c.ForceShutdown)
			}
			if !e.jobs()[decide.JobName(c.Name, "stop", 1)] || c.LastShutdownJob == "" {
				t.Fatalf("no force shutdown Job: %v", e.jobs())
			}
		})
	}
}

func TestJobMonitorLeavesACompletedJobToTheGate(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.increase("g", 1)
	e.passes()
	e.finishJob(e.claim("a").StartupJob, true, "")
	if d := e.passes(); d <= 0 || d > 90*time.Second+time.Second {
		t.Fatalf("requeue %s, want the registration wait", d)
	}
	if c := e.claim("a"); c.Phase != projections.PhaseBooting {
		t.Fatalf("%s", c.Phase)
	}
}

// A failed Job's own word on why (a power driver's termination message)
// reaches the log: in the claim's failure and in the Job's outcome, on one
// line, bounded.
func TestFailedJobSaysWhyInTheLog(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.increase("g", 1)
	e.passes()
	c := e.claim("a")
	said := "WrongCredentials: wrong credentials: the BMC at ipmi:10.0.0.21:623 refused user \"admin\"\n" + strings.Repeat("x", 2*events.MaxJobMessage)
	if err := e.f.JobPodTerminated(context.Background(), ns, c.StartupJob, 3, said, e.h.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.f.FinishJob(context.Background(), ns, c.StartupJob, false, "BackoffLimitExceeded", "Job has reached the specified backoff limit", e.h.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	e.passes()
	var failed *events.ClaimFailed
	var observed *events.JobObserved
	err := e.h.Store.ReadAggregate(context.Background(), events.SlotAggregate("a"), func(ev events.Event) error {
		switch d := ev.Data.(type) {
		case events.ClaimFailed:
			failed = &d
		case events.JobObserved:
			if d.Outcome == events.JobFailed {
				observed = &d
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `the Job said: WrongCredentials: wrong credentials: the BMC at ipmi:10.0.0.21:623 refused user "admin"; xxx`
	if failed == nil || failed.Reason != projections.ReasonStartupJobFailed || !strings.Contains(failed.Message, want) {
		t.Fatalf("ClaimFailed %+v, want a message with %q", failed, want)
	}
	if observed == nil || !strings.HasPrefix(observed.Message, "WrongCredentials: ") || len(observed.Message) != events.MaxJobMessage || strings.Contains(observed.Message, "\n") {
		t.Fatalf("JobObserved %+v: want the Job's message on one line, %d bytes", observed, events.MaxJobMessage)
	}
}
