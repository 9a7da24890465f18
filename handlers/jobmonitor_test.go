package handlers_test

import (
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
