package handlers

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
)

// Observer records the slot's Node as the cluster's caches show it
// (NodeObserved), on change only, and with it the machine's power fact
// (MachinePoweredOn/Off, power.go) when its power state changed. It runs first on every slot, so the other
// reactors decide from an observation that is in the log.
type Observer struct{ base }

func (r *Observer) Name() string { return "observe" }

func (r *Observer) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if !v.Exists || v.Slot.Group == "" {
		return 0, nil
	}
	var st events.NodeState
	var readySince time.Time
	if n, ok := r.cluster.Node(v.Slot.NodeName()); ok {
		st, readySince = n.State(), n.ReadySince
	}
	if decide.NodeStatesEqual(v.Slot.Node, st) && (v.Slot.PoweredOnRecorded() == decide.PoweredOn(st) || v.Slot.SeenOnByDriver()) {
		return 0, nil
	}
	_, err := r.exec(ctx, r.Name(), decide.ObserveNode{Slot: slot, Node: st, ReadySince: readySince})
	return 0, err
}
