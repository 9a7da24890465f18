package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// ObserveJob records that the cluster showed a lifecycle Job the log
// recorded (JobObserved): the claim's startup Job, or the slot's last
// shutdown Job. Once recorded, the Job is never created again for its
// attempt: a Job gone from the cluster (its TTL, a person) ran. Written
// when the Job is first shown, and once more with its Outcome when it is
// seen finished (one write when it is first shown finished).
type ObserveJob struct {
	Slot      string
	Claim     string // empty: an input-law shutdown
	Job       string
	Operation string // OperationStartup | OperationShutdown
	Created   bool
	// Outcome, FinishedAt and Reason: how the Job ended (jobOutcome);
	// Outcome empty while it runs.
	Outcome    string
	FinishedAt *time.Time
	Reason     string
	Cause      string
}

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

func (c ObserveJob) LockKey(s *projections.State) string { return groupOfSlot(s, c.Slot) }

// ClaimName is the claim the command is about (ClaimCommand).
func (c ObserveJob) ClaimName() string { return c.Claim }

func (c ObserveJob) Decide(s *projections.State, now time.Time) ([]eventlog.Write, error) {
	sl := s.Slots[c.Slot]
	if sl == nil || sl.Group == "" {
		return nil, nil
	}
	ref := events.Ref{Slot: sl.Name, Group: sl.Group, Claim: c.Claim, Cause: c.Cause}
	switch c.Operation {
	case OperationStartup:
		cl := s.Claims[c.Claim]
		if cl == nil || cl.StartupJob != c.Job || cl.StartupJobObserved && (c.Outcome == "" || cl.StartupJobOutcome != nil) {
			return nil, nil
		}
		ref = claimRef(cl, c.Cause)
	case OperationShutdown:
		if ls := sl.LastShutdown; ls == nil || ls.Job != c.Job || ls.Observed && (c.Outcome == "" || ls.Outcome != nil) {
			return nil, nil
		}
		if cl := s.Claims[c.Claim]; cl != nil {
			ref = claimRef(cl, c.Cause)
		}
	default:
		return nil, fmt.Errorf("observe Job %s: operation %q is neither %s nor %s", c.Job, c.Operation, OperationStartup, OperationShutdown)
	}
	return []eventlog.Write{slotWrite(s, sl.Name, now, events.JobObserved{
		Ref: ref, Job: c.Job, Operation: c.Operation, Created: c.Created,
		Outcome: c.Outcome, FinishedAt: c.FinishedAt, Reason: c.Reason,
	})}, nil
}

// observeJob appends the JobObserved of a Job the cluster showed.
func (b base) observeJob(ctx context.Context, reactor string, req JobRequest, created bool, how string) error {
	_, err := b.exec(ctx, reactor, ObserveJob{Slot: req.Slot, Claim: req.Claim, Job: req.Name, Operation: req.Operation, Created: created, Cause: how})
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
