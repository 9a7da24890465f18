package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// ReadinessGate holds a booting claim whose startup Job completed until its
// machine can take the pool's work: the Node must register within the
// group's registration wait (90s) of the Job's completion, then be Ready
// and free of the group's readiness taints within the gate (4m) of its
// appearance. Passing: uncordon, then ready (the move clears the deadline).
// Timing out: uncordon (a cordoned node is invisible to scale-down), then
// failed/ReadinessGateTimeout with a force shutdown. The slot's declared
// labels and taints are applied to the Node as soon as it registers.
type ReadinessGate struct{ base }

func (r *ReadinessGate) Name() string { return "readiness" }

func (r *ReadinessGate) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	cl := v.Live
	if cl == nil || cl.Phase != projections.PhaseBooting || !v.GroupOK || cl.BootCommittedAt == nil {
		return 0, nil
	}
	now := r.now()
	name := v.Slot.NodeName()
	node, present := r.cluster.Node(name)
	var gateStart time.Time
	job, ok := r.cluster.Job(cl.StartupJob)
	switch {
	case ok && job.Phase == JobSucceeded:
		gateStart = job.FinishedAt
		if gateStart.IsZero() {
			gateStart = *cl.BootCommittedAt
		}
	case !ok && present && !node.CreatedAt.Before(*cl.BootCommittedAt):
		gateStart = *cl.BootCommittedAt // the Job ran and its TTL removed it
	default:
		return 0, nil
	}
	t := v.timeouts()
	timeout := func(msg string) error {
		if present {
			if err := r.cluster.Uncordon(ctx, name); err != nil {
				return fmt.Errorf("uncordon %s: %w", name, err)
			}
		}
		_, err := r.exec(ctx, r.Name(), decide.FailInPhase{Phase: projections.PhaseBooting, FailClaim: decide.FailClaim{
			Claim: cl.Name, Reason: projections.ReasonReadinessGateTimeout, Message: msg, ForceShutdown: true,
			Cause: "readiness gate timed out",
		}})
		return err
	}
	if !present {
		end := gateStart.Add(t.RegistrationWait)
		if !now.Before(end) {
			// The cache may lag the API server: a Node that registered in
			// time is waited for, never failed.
			n, live, err := r.cluster.GetNode(ctx, name)
			if err != nil {
				return 0, err
			}
			if live && !n.CreatedAt.After(end) {
				return projections.JobMonitorPollInterval, nil
			}
			return 0, timeout(fmt.Sprintf("node %s did not register within %s of the startup Job", name, t.RegistrationWait))
		}
		return after(now, end), nil
	}
	if err := r.cluster.ApplySlotConfig(ctx, name, v.Slot.Spec.Labels, v.Slot.Spec.Taints); err != nil {
		return 0, fmt.Errorf("apply slot config to %s: %w", name, err)
	}
	var waiting []string
	if !node.Ready {
		waiting = append(waiting, "NotReady")
	}
	for _, taint := range projections.ReadinessTaints(v.Group) {
		if node.HasTaint(taint) {
			waiting = append(waiting, "taint "+taint.String())
		}
	}
	if len(waiting) == 0 {
		if node.Unschedulable {
			if err := r.cluster.Uncordon(ctx, name); err != nil {
				return 0, fmt.Errorf("uncordon %s: %w", name, err)
			}
		}
		_, err := r.exec(ctx, r.Name(), decide.MarkReady{Claim: cl.Name, Node: node.Name, Cause: "readiness gate passed: node Ready and free of the readiness taints"})
		return 0, err
	}
	since := node.CreatedAt
	if since.Before(gateStart) {
		since = gateStart
	}
	end := since.Add(t.ReadinessGate)
	if !now.Before(end) {
		return 0, timeout(fmt.Sprintf("node %s not usable %s after it appeared: %v", name, t.ReadinessGate, waiting))
	}
	return after(now, end), nil
}
