package handlers

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// InputLaw shuts down a machine observed up with no live claim (its Node
// Ready, or no Node and its power driver reading it on, PowerWatch):
// ShutdownFired (no claim, Force, the cause naming the law), then the
// cordon and the shutdown Job <slot>-stop-<slot seq>. While a shutdown of
// the slot is in flight (running, or finished less than ShutdownSettle ago)
// it waits; a machine that stays up gets another, up to
// ShutdownAttemptLimit in a row, then a pause of ShutdownAttemptResetGrace,
// recorded as UnclaimedShutdownPaused.
type InputLaw struct{ base }

func (r *InputLaw) Name() string { return "inputlaw" }

func (r *InputLaw) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if !v.GroupOK || v.Live != nil || !(v.Slot.PoweredOn() || v.Slot.SeenOnByDriver()) {
		return 0, nil
	}
	last := v.Slot.LastShutdown
	after0 := ""
	if last != nil {
		after0 = last.Job
		wait, err := r.shutdownInFlight(ctx, r.Name(), v, last.Job, last.Claim, last.Attempt, last.At)
		if err != nil || wait > 0 {
			return wait, err
		}
	}
	if v.Slot.Spec.Shutdown == nil {
		r.log.Warn("slot declares no shutdown Job: the input law cannot power its machine off", "slot", slot)
		return projections.ReconcilePeriod, nil
	}
	res, err := r.exec(ctx, r.Name(), decide.FireSlotShutdown{Slot: slot, After: after0})
	if err != nil {
		return 0, err
	}
	d, ok := shutdownEvent(res)
	if !ok {
		if last != nil && last.Claim == "" && last.Attempt >= projections.ShutdownAttemptLimit {
			// Paused after ShutdownAttemptLimit shutdowns that did not
			// land: say so in the log, once per pause (an alert's event).
			until := last.At.Add(projections.ShutdownAttemptResetGrace)
			if _, err := r.exec(ctx, r.Name(), decide.PauseSlotShutdown{Slot: slot, After: last.Job}); err != nil {
				return 0, err
			}
			// The shutdowns in the log took it out of service: a Node that
			// registered again meanwhile stays cordoned.
			if err := r.cordon(ctx, slot, "", "input law: shutdowns paused"); err != nil {
				return 0, err
			}
			return after(r.now(), until), nil
		}
		return 0, nil
	}
	// Cordon and power off only after ShutdownFired is in the log.
	if err := r.cordon(ctx, slot, "", "input law: machine up with no claim that wants it"); err != nil {
		return 0, err
	}
	created, err := r.fireShutdownJob(ctx, r.Name(), v, d.Job, "", 0)
	if err != nil {
		return 0, err
	}
	r.log.Info(jobCreatedLine(decide.OperationShutdown, created, false), "slot", slot, "job", d.Job, "shutdownAttempt", d.ShutdownAttempt, "force", d.Force, "why", "input law")
	return projections.JobMonitorPollInterval, nil
}
