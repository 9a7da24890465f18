package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
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
// A booting claim whose Job is not there (the process died between the
// append and the create) gets it created again, unless its Node already
// registered after the boot began (the Job ran and was removed by its TTL).
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
			_, err := r.exec(ctx, r.Name(), FailInPhase{Phase: projections.PhasePending, FailClaim: FailClaim{
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
		res, err := r.exec(ctx, r.Name(), BootClaim{Claim: cl.Name, Cause: "boot: pending claim, startup Job follows"})
		if err != nil {
			return 0, err
		}
		for _, e := range res.Events {
			if d, ok := e.Data.(events.ClaimBooting); ok {
				if err := r.cluster.CreateJob(ctx, r.jobRequest(v, d.StartupJob, cl.Name, d.Attempt, OperationStartup, v.Slot.Spec.Startup)); err != nil {
					return 0, fmt.Errorf("create startup Job %s: %w", d.StartupJob, err)
				}
				r.log.Info("startup Job created", "slot", slot, "claim", cl.Name, "attempt", d.Attempt, "job", d.StartupJob)
			}
		}
		return 0, nil
	case cl.Phase == projections.PhaseBooting && cl.StartupJob != "" && v.Slot.Spec.Startup != nil && !cl.Overdue(r.now()):
		if _, ok := r.cluster.Job(cl.StartupJob); ok {
			return 0, nil
		}
		if n, ok := r.cluster.Node(v.Slot.NodeName()); ok && cl.BootCommittedAt != nil && !n.CreatedAt.Before(*cl.BootCommittedAt) {
			return 0, nil // the Job ran; the readiness gate has the claim
		}
		if err := r.cluster.CreateJob(ctx, r.jobRequest(v, cl.StartupJob, cl.Name, cl.Attempt, OperationStartup, v.Slot.Spec.Startup)); err != nil {
			return 0, fmt.Errorf("create startup Job %s: %w", cl.StartupJob, err)
		}
		r.log.Info("startup Job created again (recorded by ClaimBooting, not found)", "slot", slot, "claim", cl.Name, "attempt", cl.Attempt, "job", cl.StartupJob)
		return 0, nil
	}
	return 0, nil
}
