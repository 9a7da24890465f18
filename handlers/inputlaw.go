package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/projections"
)

// InputLaw shuts down a machine observed up with no live claim: cordon,
// ShutdownFired (no claim, Force, the cause naming the law), then the
// shutdown Job <slot>-stop-<slot seq>. While a shutdown of the slot is in
// flight (running, or finished less than ShutdownSettle ago) it waits; a
// machine that stays up gets another, up to ShutdownAttemptLimit in a row,
// then a pause of ShutdownAttemptResetGrace.
type InputLaw struct{ base }

func (r *InputLaw) Name() string { return "inputlaw" }

func (r *InputLaw) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if !v.GroupOK || v.Live != nil || !v.Slot.PoweredOn() {
		return 0, nil
	}
	last := v.Slot.LastShutdown
	after0 := ""
	if last != nil {
		after0 = last.Job
		wait, err := r.shutdownInFlight(ctx, v, last.Job, last.Claim, last.Attempt, last.At)
		if err != nil || wait > 0 {
			return wait, err
		}
	}
	if v.Slot.Spec.Shutdown == nil {
		r.log.Warn("slot declares no shutdown Job: the input law cannot power its machine off", "slot", slot)
		return projections.ReconcilePeriod, nil
	}
	if err := r.cluster.Cordon(ctx, v.Slot.NodeName()); err != nil {
		return 0, fmt.Errorf("cordon %s: %w", v.Slot.NodeName(), err)
	}
	res, err := r.exec(ctx, r.Name(), FireSlotShutdown{Slot: slot, After: after0})
	if err != nil {
		return 0, err
	}
	d, ok := shutdownEvent(res)
	if !ok {
		if last != nil {
			// Paused after ShutdownAttemptLimit shutdowns that did not land.
			return after(r.now(), last.At.Add(projections.ShutdownAttemptResetGrace)), nil
		}
		return 0, nil
	}
	if err := r.ensureShutdownJob(ctx, v, d.Job, "", 0); err != nil {
		return 0, fmt.Errorf("create shutdown Job %s: %w", d.Job, err)
	}
	return projections.JobMonitorPollInterval, nil
}
