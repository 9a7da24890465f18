package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// Boot moves a pending claim to booting and creates its startup Job:
// ClaimBooting (attempt, Job name <claim>-start-<attempt>) is appended
// first, the Job is created after. The attempt bound and an overdue claim
// are BootClaim's: the claim fails instead of booting. A slot that declares
// no startup Job cannot boot: the claim fails StartupJobFailed.
//
// A pending claim waits while a shutdown Job of the slot is running (a boot
// and a power-off never race on one machine; the deadline bounds the wait).
//
// The Job is created once per attempt: JobObserved records that the cluster
// showed it, and a Job observed once is never created again (gone by its
// TTL or by hand, it ran). A booting claim whose Job was never observed is
// looked for in the cache, then read from the API server, and created only
// when neither has it (the process died between the append and the
// create), unless its Node already registered after the boot began.
type Boot struct{ base }

func (r *Boot) Name() string { return "boot" }

func (r *Boot) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	cl := v.Live
	if cl == nil || !v.Active || !v.GroupOK {
		return 0, nil
	}
	switch {
	case cl.IsPending() && cl.WantsMachine():
		if v.Slot.Spec.Startup == nil {
			_, err := r.exec(ctx, r.Name(), decide.FailInPhase{Phase: projections.PhasePending, FailClaim: decide.FailClaim{
				Claim: cl.Name, Reason: projections.ReasonStartupJobFailed,
				Message: fmt.Sprintf("slot %s declares no startup Job: it cannot boot", slot),
				Cause:   "boot: the slot has no startup pod spec",
			}})
			return 0, err
		}
		if ls := v.Slot.LastShutdown; ls != nil {
			if job, ok := r.cluster.Job(ls.Job); ok && !job.Finished() {
				// A power-off is in flight: a boot never races it.
				return projections.JobMonitorPollInterval, nil
			}
		}
		res, err := r.exec(ctx, r.Name(), decide.BootClaim{Claim: cl.Name, Cause: "boot: pending claim, startup Job follows"})
		if err != nil {
			return 0, err
		}
		for _, e := range res.Events {
			if d, ok := e.Data.(events.ClaimBooting); ok {
				req := r.jobRequest(v, d.StartupJob, cl.Name, d.Attempt, decide.OperationStartup, v.Slot.Spec.Startup)
				created, err := r.createObserved(ctx, r.Name(), req)
				if err != nil {
					return 0, err
				}
				r.log.Info(jobCreatedLine(decide.OperationStartup, created, false), "slot", slot, "claim", cl.Name, "attempt", d.Attempt, "job", d.StartupJob)
			}
		}
		return 0, nil
	case cl.Phase == projections.PhaseBooting && cl.StartupJob != "" && v.Slot.Spec.Startup != nil && !cl.Overdue(r.now()):
		if cl.StartupJobObserved {
			return 0, nil // it ran, or runs: never again for this attempt
		}
		if _, ok := r.cluster.Job(cl.StartupJob); !ok {
			if n, ok := r.cluster.Node(v.Slot.NodeName()); ok && cl.BootCommittedAt != nil && !n.CreatedAt.Before(*cl.BootCommittedAt) {
				return 0, nil // the Job ran; the readiness gate has the claim
			}
		}
		created, err := r.recoverJob(ctx, r.Name(), r.jobRequest(v, cl.StartupJob, cl.Name, cl.Attempt, decide.OperationStartup, v.Slot.Spec.Startup))
		if err != nil {
			return 0, err
		}
		if created {
			r.log.Info(jobCreatedLine(decide.OperationStartup, true, true), "slot", slot, "claim", cl.Name, "attempt", cl.Attempt, "job", cl.StartupJob)
		}
		return 0, nil
	}
	return 0, nil
}

// jobCreatedLine is the log line of a lifecycle Job's create: what the
// API server answered.
func jobCreatedLine(op string, created, again bool) string {
	switch {
	case !created:
		return op + " Job found (AlreadyExists): not created"
	case again:
		return op + " Job created (recorded, absent from the cluster)"
	}
	return op + " Job created"
}
