package handlers

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// ScaleDown powers off the machine of a ready claim marked for scale-down:
// cordon (ScaleDownRequested is in the log), then a shutdown Job
// (ShutdownFired appended first, one count per Job, <claim>-stop-<n>); the machine observed off ends the claim
// completed. A shutdown that finished with the machine still up fires the
// next one after ShutdownSettle; past ShutdownAttemptLimit Jobs the claim
// records ShutdownAttemptLimitReached and pauses ShutdownAttemptResetGrace,
// then fires again. A booting claim marked for scale-down is committed: it
// runs to ready (then this) or failed (then its force shutdown).
//
// It also runs the force shutdown of a failed claim (ForceShutdown) once,
// when the slot has no newer live claim: an overdue or broken boot must
// not join and serve. A machine still up after that is the input law's.
type ScaleDown struct{ base }

func (r *ScaleDown) Name() string { return "scaledown" }

func (r *ScaleDown) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if !v.GroupOK {
		return 0, nil
	}
	if cl := v.Live; cl != nil && cl.Phase == projections.PhaseReady && cl.ScaleDown != nil {
		return r.scaleDown(ctx, v, cl)
	}
	if v.Live == nil && v.Newest != nil {
		return r.forceShutdown(ctx, v, v.Newest)
	}
	return 0, nil
}

func (r *ScaleDown) scaleDown(ctx context.Context, v slotView, cl *projections.Claim) (time.Duration, error) {
	slot := v.Slot.NodeName()
	if !v.Slot.PoweredOn() {
		_, err := r.exec(ctx, r.Name(), decide.CompleteClaim{Claim: cl.Name, Reason: projections.ReasonScaledDown, Cause: "scale-down landed: machine observed off"})
		return 0, err
	}
	// ScaleDownRequested, in the log, took the machine out of service.
	if err := r.cordon(ctx, slot, cl.Name, "scale-down requested"); err != nil {
		return 0, err
	}
	now := r.now()
	if p := cl.ShutdownPausedUntil; p != nil && now.Before(*p) {
		return after(now, *p), nil
	}
	if cl.LastShutdownJob != "" {
		at := now
		if cl.LastShutdownAttemptAt != nil {
			at = *cl.LastShutdownAttemptAt
		}
		wait, err := r.shutdownInFlight(ctx, r.Name(), v, cl.LastShutdownJob, cl.Name, cl.Attempt, at)
		if err != nil || wait > 0 {
			return wait, err
		}
	}
	if cl.ShutdownAttempts >= projections.ShutdownAttemptLimit {
		_, err := r.exec(ctx, r.Name(), decide.LimitShutdown{Claim: cl.Name})
		return projections.ShutdownAttemptResetGrace, err
	}
	if v.Slot.Spec.Shutdown == nil {
		r.log.Warn("slot declares no shutdown Job: its scale-down cannot power the machine off", "slot", slot, "claim", cl.Name)
		return projections.ReconcilePeriod, nil
	}
	return r.fire(ctx, v, cl, decide.FireShutdown{Claim: cl.Name, After: cl.LastShutdownJob, Cause: "scale-down: " + cl.ScaleDown.Request.Call + " by " + cl.ScaleDown.RequestedBy})
}

// fire appends the ShutdownFired of cmd, then cordons the Node and creates
// the Job it names.
func (r *ScaleDown) fire(ctx context.Context, v slotView, cl *projections.Claim, cmd decide.FireShutdown) (time.Duration, error) {
	res, err := r.exec(ctx, r.Name(), cmd)
	if err != nil {
		return 0, err
	}
	if d, ok := shutdownEvent(res); ok {
		if err := r.cordon(ctx, v.Slot.Name, cl.Name, "shutdown fired"); err != nil {
			return 0, err
		}
		created, err := r.fireShutdownJob(ctx, r.Name(), v, d.Job, cl.Name, cl.Attempt)
		if err != nil {
			return 0, err
		}
		r.log.Info(jobCreatedLine(decide.OperationShutdown, created, false), "slot", v.Slot.Name, "claim", cl.Name, "job", d.Job, "shutdownAttempt", d.ShutdownAttempt, "force", d.Force)
	}
	return projections.JobMonitorPollInterval, nil
}

func (r *ScaleDown) forceShutdown(ctx context.Context, v slotView, cl *projections.Claim) (time.Duration, error) {
	if cl.Phase != projections.PhaseFailed || !cl.ForceShutdown {
		return 0, nil
	}
	if cl.LastShutdownJob != "" {
		// Fired: make sure its Job exists (a crash between the append and the create).
		at := r.now()
		if cl.LastShutdownAttemptAt != nil {
			at = *cl.LastShutdownAttemptAt
		}
		return r.shutdownInFlight(ctx, r.Name(), v, cl.LastShutdownJob, cl.Name, cl.Attempt, at)
	}
	if ls := v.Slot.LastShutdown; ls != nil && cl.FinishedAt != nil && !ls.At.Before(*cl.FinishedAt) {
		return 0, nil // the input law already shut the machine down
	}
	if v.Slot.Spec.Shutdown == nil {
		r.log.Warn("slot declares no shutdown Job: a failed claim's machine cannot be forced off", "slot", v.Slot.Name, "claim", cl.Name)
		return 0, nil
	}
	return r.fire(ctx, v, cl, decide.FireShutdown{Claim: cl.Name, Force: true, Cause: "force shutdown: claim failed " + cl.Reason})
}
