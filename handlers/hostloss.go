package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// Provider signals that a host is gone (a spot reclaim, a terminated or
// shut-down instance): the cloud controller manager's shutdown taint and
// the out-of-service taint.
var HostLossTaints = []string{"node.cloudprovider.kubernetes.io/shutdown", "node.kubernetes.io/out-of-service"}

// HostLoss fails a ready claim whose provider reports its host gone (the
// shutdown or out-of-service taint on its Node): the machine-gone path
// (failed, force shutdown) at once, with the reason HostLost and the
// signal recorded. A machine that just goes dark is MachineGone's, after
// its grace.
type HostLoss struct{ base }

func (r *HostLoss) Name() string { return "hostloss" }

func (r *HostLoss) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	cl := v.Live
	if cl == nil || cl.Phase != projections.PhaseReady || cl.ScaleDown != nil || !v.GroupOK {
		return 0, nil
	}
	n, ok := r.cluster.Node(v.Slot.NodeName())
	if !ok {
		return 0, nil
	}
	for _, key := range HostLossTaints {
		if n.HasTaint(events.Taint{Key: key}) {
			_, err := r.exec(ctx, r.Name(), decide.FailInPhase{Phase: projections.PhaseReady, FailClaim: decide.FailClaim{
				Claim: cl.Name, Reason: projections.ReasonHostLost, ForceShutdown: true,
				Message: fmt.Sprintf("the provider reports host %s gone (taint %s)", n.Name, key),
				Cause:   "host loss: provider-initiated",
			}})
			return 0, err
		}
	}
	return 0, nil
}
