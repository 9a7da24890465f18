package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// MachineGone watches a ready claim's machine: observed off ->
// MachineObservedOff (the clock is on the claim, so a restart does not
// restart it); back on -> MachineObservedOn; off for longer than one boot
// window (MachineGoneGrace) -> failed/MachineGone with a force shutdown. A
// claim marked for scale-down is the scale-down's.
type MachineGone struct{ base }

func (r *MachineGone) Name() string { return "machinegone" }

func (r *MachineGone) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	cl := v.Live
	if cl == nil || cl.Phase != projections.PhaseReady || cl.ScaleDown != nil || !v.GroupOK {
		return 0, nil
	}
	on := v.Slot.PoweredOn()
	switch {
	case on && cl.MachineOffSince != nil:
		_, err := r.exec(ctx, r.Name(), decide.ObserveMachine{Claim: cl.Name, On: true, Cause: "machine-gone watch: node " + v.Slot.NodeName() + " Ready again"})
		return 0, err
	case on:
		return 0, nil
	case cl.MachineOffSince == nil:
		_, err := r.exec(ctx, r.Name(), decide.ObserveMachine{Claim: cl.Name, Cause: "machine-gone watch: node " + v.Slot.NodeName() + " " + offWhy(v)})
		return projections.MachineGoneGrace(v.Group), err
	}
	grace := projections.MachineGoneGrace(v.Group)
	now := r.now()
	end := cl.MachineOffSince.Add(grace)
	if now.Before(end) {
		return after(now, end), nil
	}
	_, err := r.exec(ctx, r.Name(), decide.FailInPhase{Phase: projections.PhaseReady, FailClaim: decide.FailClaim{
		Claim: cl.Name, Reason: projections.ReasonMachineGone, ForceShutdown: true,
		Message: fmt.Sprintf("machine observed off since %s, longer than %s", cl.MachineOffSince.Format(time.RFC3339), grace),
		Cause:   "machine-gone watch: bound passed",
	}})
	return 0, err
}

func offWhy(v slotView) string {
	if !v.Slot.Node.Present {
		return "has no node object"
	}
	return "is NotReady"
}
