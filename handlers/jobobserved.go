package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
)

// jobOutcome is what a JobObserved records of a finished Job.
func jobOutcome(st JobState) (outcome string, finishedAt *time.Time, reason string) {
	switch st.Phase {
	case JobSucceeded:
		outcome = events.JobSucceeded
	case JobFailed:
		outcome, reason = events.JobFailed, st.Reason
	default:
		return "", nil, ""
	}
	if !st.FinishedAt.IsZero() {
		at := st.FinishedAt.UTC()
		finishedAt = &at
	}
	return outcome, finishedAt, reason
}

// observeJob appends the JobObserved of a Job the cluster showed.
func (b base) observeJob(ctx context.Context, reactor string, req JobRequest, created bool, how string) error {
	_, err := b.exec(ctx, reactor, decide.ObserveJob{Slot: req.Slot, Claim: req.Claim, Job: req.Name, Operation: req.Operation, Created: created, Cause: how})
	return err
}

// createObserved creates a lifecycle Job the log recorded and records
// what the API server answered (JobObserved): created, or found there.
func (b base) createObserved(ctx context.Context, reactor string, req JobRequest) (created bool, err error) {
	created, err = b.cluster.CreateJob(ctx, req)
	if err != nil {
		return false, fmt.Errorf("create %s Job %s: %w", req.Operation, req.Name, err)
	}
	how := reactor + ": " + req.Operation + " Job created"
	if !created {
		how = reactor + ": " + req.Operation + " Job found (AlreadyExists)"
	}
	if err := b.observeJob(ctx, reactor, req, created, how); err != nil {
		return created, err
	}
	return created, nil
}

// recoverJob is the pass over a lifecycle Job the log recorded
// (ClaimBooting, ShutdownFired) and never saw observed: one the cache shows
// is recorded; one the cache lacks is read from the API server, and
// created only when that read finds none either (the process died between
// the append and the create). It reports whether it created the Job.
func (b base) recoverJob(ctx context.Context, reactor string, req JobRequest) (created bool, err error) {
	if _, ok := b.cluster.Job(req.Name); ok {
		return false, b.observeJob(ctx, reactor, req, false, reactor+": "+req.Operation+" Job seen in the cluster")
	}
	if _, ok, err := b.cluster.GetJob(ctx, req.Name); err != nil {
		return false, err
	} else if ok {
		return false, b.observeJob(ctx, reactor, req, false, reactor+": "+req.Operation+" Job read from the API server")
	}
	return b.createObserved(ctx, reactor, req)
}
