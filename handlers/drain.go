package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// DefaultDrainTimeout bounds a drain when the group sets no drainTimeout
// (cluster-autoscaler's max-graceful-termination-sec is 600).
const DefaultDrainTimeout = 10 * time.Minute

// DrainRetry is how often a drain retries its evictions.
const DrainRetry = 10 * time.Second

// DrainSettings are a group's drain timeout and policy, defaults applied.
func DrainSettings(g events.GroupSpec) (time.Duration, string) {
	timeout := DefaultDrainTimeout
	if g.DrainTimeout > 0 {
		timeout = g.DrainTimeout.D()
	}
	policy := g.OnDrainTimeout
	if policy == "" {
		policy = events.DrainWait
	}
	return timeout, policy
}

// Drain runs before the scale-down of a ready claim's machine (it wraps the
// ScaleDown reactor and keeps its name): while the machine is up and holds
// pods a drain must move (not finished, not a DaemonSet's, not a mirror),
// it cordons the Node and evicts them through the eviction API, which
// honours PodDisruptionBudgets (DrainStarted records the start, the
// timeout and the policy). Past the group's drainTimeout (DrainTimedOut):
// wait stops evicting and waits for the pods to end; evict keeps retrying
// the evictions; force deletes the remaining pods and goes on. Once the
// node is empty the scale-down proceeds: shutdown, then the claim ends.
// A decommission, a DeleteNodes and a built-in scale-in all come this way.
type Drain struct {
	base
	next Reactor
}

func (r *Drain) Name() string { return r.next.Name() }

func (r *Drain) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if cl := v.Live; v.GroupOK && cl != nil && cl.Phase == projections.PhaseReady && cl.ScaleDown != nil {
		if n, ok := r.cluster.Node(v.Slot.NodeName()); ok && n.Ready {
			wait, done, err := r.drain(ctx, v, cl)
			if err != nil || !done {
				return wait, err
			}
		}
	}
	return r.next.Reconcile(ctx, slot)
}

func (r *Drain) drain(ctx context.Context, v slotView, cl *projections.Claim) (time.Duration, bool, error) {
	slot, node := v.Slot.Name, v.Slot.NodeName()
	pods, err := r.cluster.ListPodsOnNode(ctx, node)
	if err != nil {
		return 0, false, err
	}
	var left []PodView
	var keys []string
	for _, p := range pods {
		if p.Drainable() {
			left = append(left, p)
			keys = append(keys, p.Key())
		}
	}
	if len(left) == 0 {
		return 0, true, nil
	}
	// The drain in force is the one recorded: DrainStarted carries the
	// timeout and policy of the group when the drain began, and a later
	// change of the group does not change a drain under way.
	drain := cl.Drain
	if drain == nil {
		timeout, policy := DrainSettings(v.Group)
		if _, err := r.exec(ctx, r.Name(), decide.StartDrain{Claim: cl.Name, Node: node, Pods: keys, Timeout: timeout, Policy: policy}); err != nil {
			return 0, false, err
		}
		if drain = r.recordedDrain(slot, cl.Name); drain == nil {
			return DrainRetry, false, nil
		}
	}
	// Cordon and evict only after DrainStarted is in the log.
	if err := r.cordon(ctx, slot, cl.Name, "drain before scale-down"); err != nil {
		return 0, false, err
	}
	now := r.now()
	end := drain.StartedAt.Add(drain.Timeout.D())
	if now.Before(end) {
		// The evictions DrainStarted decided: the pods it lists.
		if err := r.evict(ctx, slot, cl.Name, recorded(left, drain.Pods)); err != nil {
			return 0, false, err
		}
		return min(DrainRetry, after(now, end)), false, nil
	}
	remaining := drain.Remaining
	if drain.TimedOutAt == nil {
		if _, err := r.exec(ctx, r.Name(), decide.TimeOutDrain{Claim: cl.Name, Remaining: keys}); err != nil {
			return 0, false, err
		}
		if d := r.recordedDrain(slot, cl.Name); d == nil || d.TimedOutAt == nil {
			return DrainRetry, false, nil
		} else {
			remaining = d.Remaining
		}
	}
	switch drain.Policy {
	case events.DrainForce:
		// The deletes DrainTimedOut decided: the pods it lists.
		var deleted []string
		for _, p := range recorded(left, remaining) {
			if p.Deleting {
				continue
			}
			if err := r.cluster.DeletePod(ctx, p); err != nil {
				return 0, false, fmt.Errorf("delete pod %s: %w", p.Key(), err)
			}
			deleted = append(deleted, p.Key())
		}
		if len(deleted) > 0 {
			r.log.Warn("drain timed out: remaining pods deleted (force)", "slot", slot, "claim", cl.Name, "pods", deleted)
		}
		if len(recorded(left, remaining)) < len(left) {
			// Pods that came after the timeout was recorded are not this
			// drain's to delete; they hold the shutdown.
			return DrainRetry, false, nil
		}
		return 0, true, nil
	case events.DrainEvict:
		return DrainRetry, false, r.evict(ctx, slot, cl.Name, recorded(left, remaining))
	default:
		// wait: no more evictions; the claim is reported to
		// cluster-autoscaler as deleting until its pods end.
		return projections.JobMonitorPollInterval, false, nil
	}
}

// recorded keeps the pods an event listed (namespace/name keys).
func recorded(pods []PodView, keys []string) []PodView {
	var out []PodView
	for _, p := range pods {
		if slices.Contains(keys, p.Key()) {
			out = append(out, p)
		}
	}
	return out
}

// recordedDrain is the drain of claim as the views hold it once a command
// returned (the service waits for its write to show), or nil.
func (r *Drain) recordedDrain(slot, claim string) *projections.Drain {
	if v := r.view(slot); v.Live != nil && v.Live.Name == claim {
		return v.Live.Drain
	}
	return nil
}

// evict asks the eviction API for every pod not already going; a budget
// that forbids one now is retried on the next pass. One log line per pass
// that asked for evictions.
func (r *Drain) evict(ctx context.Context, slot, claim string, pods []PodView) error {
	var asked, blocked []string
	for _, p := range pods {
		if p.Deleting {
			continue
		}
		err := r.cluster.Evict(ctx, p)
		switch {
		case errors.Is(err, ErrEvictionBlocked):
			blocked = append(blocked, p.Key())
		case err != nil:
			return fmt.Errorf("evict pod %s: %w", p.Key(), err)
		default:
			asked = append(asked, p.Key())
		}
	}
	if len(asked)+len(blocked) > 0 {
		r.log.Info("drain: evictions requested", "slot", slot, "claim", claim, "evicted", asked, "blockedByBudget", blocked)
	}
	return nil
}
