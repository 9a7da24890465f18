package handlers

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/events"
)

// Observer records the slot's Node as the cluster's caches show it
// (NodeObserved), on change only. It runs first on every slot, so the other
// reactors decide from an observation that is in the log.
type Observer struct{ base }

func (r *Observer) Name() string { return "observe" }

func (r *Observer) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if !v.Exists || v.Slot.Group == "" {
		return 0, nil
	}
	var st events.NodeState
	if n, ok := r.cluster.Node(v.Slot.NodeName()); ok {
		st = n.State()
	}
	if NodeStatesEqual(v.Slot.Node, st) {
		return 0, nil
	}
	_, err := r.exec(ctx, r.Name(), ObserveNode{Slot: slot, Node: st})
	return 0, err
}
