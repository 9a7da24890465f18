package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// JobMonitor watches a booting claim's startup Job: failed -> the claim
// fails StartupJobFailed (JobTimeout when Kubernetes stopped it at its
// activeDeadlineSeconds), still running past the group's job timeout ->
// JobTimeout; both with a force shutdown. A completed Job hands the claim
// to the readiness gate. The Job is found by the name the claim recorded,
// so a restarted process re-attaches to it and never reads another
// attempt's Job.
type JobMonitor struct{ base }

func (r *JobMonitor) Name() string { return "jobmonitor" }

func (r *JobMonitor) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	cl := v.Live
	if cl == nil || cl.Phase != projections.PhaseBooting || cl.StartupJob == "" || !v.GroupOK {
		return 0, nil
	}
	job, ok := r.cluster.Job(cl.StartupJob)
	if !ok {
		return 0, nil
	}
	if c := job.Labels[LabelClaim]; c != "" && c != cl.Name {
		r.log.Warn("startup Job belongs to another claim; ignored", "job", job.Name, "claim", cl.Name, "jobClaim", c)
		return 0, nil
	}
	fail := func(reason, msg string) error {
		_, err := r.exec(ctx, r.Name(), decide.FailInPhase{Phase: projections.PhaseBooting, FailClaim: decide.FailClaim{
			Claim: cl.Name, Reason: reason, Message: msg, ForceShutdown: true,
			Cause: "job monitor: startup Job " + job.Name + " " + reason,
		}})
		return err
	}
	timeout := v.timeouts().JobTimeout
	switch job.Phase {
	case JobFailed:
		if job.Reason == JobReasonDeadlineExceeded {
			return 0, fail(projections.ReasonJobTimeout, fmt.Sprintf("startup Job %s ran past its %s deadline", job.Name, timeout))
		}
		msg := fmt.Sprintf("startup Job %s failed", job.Name)
		if job.Reason != "" {
			msg += ": " + job.Reason
		}
		if job.Message != "" {
			msg += ": " + job.Message
		}
		// The Job's own word on why (a power driver's WrongCredentials,
		// Unreachable, StateNotReached) is what the operator acts on.
		said, err := r.failureMessage(ctx, job.Name)
		if err != nil {
			return 0, err
		}
		if said != "" {
			msg += "; the Job said: " + said
		}
		return 0, fail(projections.ReasonStartupJobFailed, msg)
	case JobRunning:
		start := job.CreatedAt
		if start.IsZero() && cl.BootCommittedAt != nil {
			start = *cl.BootCommittedAt
		}
		now := r.now()
		if end := start.Add(timeout); !now.Before(end) {
			return 0, fail(projections.ReasonJobTimeout, fmt.Sprintf("startup Job %s still running after %s", job.Name, timeout))
		} else {
			return after(now, end), nil
		}
	}
	return 0, nil
}
