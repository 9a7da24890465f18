package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
)

// NodeCleanup deletes the NotReady Node object of a powered-off machine once
// its shutdown finished and the slot has no live claim (a Node registered
// after the shutdown fired is left alone): a NotReady Node
// counts against cluster-autoscaler's unready gate. NodeDeleteRequested is
// appended first, then the Node is deleted (a crash between the two deletes
// it on the next pass: the record is there and NotFound is success). The
// kubelet registers the Node again on the next boot, and the readiness gate
// applies the slot's declared labels and taints to it again.
type NodeCleanup struct{ base }

func (r *NodeCleanup) Name() string { return "nodecleanup" }

func (r *NodeCleanup) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if !v.GroupOK || v.Live != nil || v.Slot.LastShutdown == nil {
		return 0, nil
	}
	node, ok := r.cluster.Node(v.Slot.NodeName())
	// Only the Node object that existed when the shutdown fired: a Node
	// created after it is a machine registering again (switched on by
	// hand, or booting), which the input law or a claim owns.
	if !ok || node.Ready || node.CreatedAt.After(v.Slot.LastShutdown.At) {
		return 0, nil
	}
	if job, ok := r.cluster.Job(v.Slot.LastShutdown.Job); ok && !job.Finished() {
		return 0, nil
	}
	res, err := r.exec(ctx, r.Name(), decide.RequestNodeDelete{Slot: slot, Node: node.Name, ShutdownJob: v.Slot.LastShutdown.Job})
	if err != nil {
		return 0, err
	}
	if d := r.view(slot).Slot.LastNodeDelete; d == nil || d.By != node.Name || d.At.Before(v.Slot.LastShutdown.At) {
		return 0, nil // not recorded: never delete without the record
	}
	if err := r.cluster.DeleteNode(ctx, node.Name); err != nil {
		return 0, fmt.Errorf("delete node %s: %w", node.Name, err)
	}
	// The Node cache lags behind the delete, so the passes after it see
	// the Node again and delete it again (NotFound is success): only the
	// pass that recorded the delete says so.
	if len(res.Events) > 0 {
		r.log.Info("deleted the NotReady node of a powered-off machine", "slot", slot, "node", node.Name, "shutdownJob", v.Slot.LastShutdown.Job)
	} else {
		r.log.Debug("deleted again a Node the cache still shows", "slot", slot, "node", node.Name)
	}
	return 0, nil
}
