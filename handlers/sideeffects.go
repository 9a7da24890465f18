package handlers

import (
	"context"
	"fmt"
)

// The side effects the reactors share. Each runs only after the event that
// decides it is in the log (append, then act), and each writes one log line
// when it changes something.

// cordon marks the slot's Node unschedulable (idempotent: the adapter
// leaves a cordoned Node as it is); the log line is written only when the
// cache saw the Node schedulable.
func (b base) cordon(ctx context.Context, slot, claim, why string) error {
	node := slot
	if v := b.view(slot); v.Exists {
		node = v.Slot.NodeName()
	}
	n, ok := b.cluster.Node(node)
	if err := b.cluster.Cordon(ctx, node); err != nil {
		return fmt.Errorf("cordon %s: %w", node, err)
	}
	if ok && !n.Unschedulable {
		b.log.Info("node cordoned", "slot", slot, "node", node, "claim", claim, "why", why)
	}
	return nil
}
