package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/scale"
	"github.com/claimstream/claimstream/projections"
)

// BuiltinRequester is who the built-in scaler's claims and scale-downs say
// asked.
const BuiltinRequester = "builtin-scaler"

// builtinScaler runs the built-in scaler (docs/design.md) over every group whose
// scaler is builtin: one observation of the cluster's work for the pass
// (every lister read once; a failed list is an error, never "no work"),
// then, per group, ScaleGroup decides and appends the ScaleDecided with the
// claims or scale-downs it implies, and the released nodes are cordoned at
// once (their drain and shutdown follow through the Drain reactor). It
// returns the soonest requeue a hold asked for.
func (r *Reactors) builtinScaler(ctx context.Context) (time.Duration, error) {
	var groups []string
	r.views.Read(func(s *projections.State) {
		for name, g := range s.Groups {
			if !g.Retired && g.Spec.Scaler == events.ScalerBuiltin {
				groups = append(groups, name)
			}
		}
	})
	if len(groups) == 0 {
		return 0, nil
	}
	obs, err := r.cluster.Workload(ctx)
	if err != nil {
		return time.Second, fmt.Errorf("built-in scaler: observe: %w", err)
	}
	var next time.Duration
	var errs []error
	slices.Sort(groups)
	for _, g := range groups {
		// One group's failure is reported and the other groups still get
		// their pass.
		d, err := r.scaleGroup(ctx, g, &obs)
		if err != nil {
			r.log.Error("built-in scaler: group pass failed", "group", g, "err", err)
			errs = append(errs, fmt.Errorf("built-in scaler: group %s: %w", g, err))
			continue
		}
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next, errors.Join(errs...)
}

// builtinScalerGroup is the built-in scaler's pass over one group (the
// work queue's item "scaler/<group>"): its own observation, then
// scaleGroup. A group that is not (or no longer) builtin has nothing to do.
func (r *Reactors) builtinScalerGroup(ctx context.Context, group string) (time.Duration, error) {
	builtin := false
	r.views.Read(func(s *projections.State) {
		g, ok := s.ActiveGroup(group)
		builtin = ok && g.Spec.Scaler == events.ScalerBuiltin
	})
	if !builtin {
		return 0, nil
	}
	obs, err := r.cluster.Workload(ctx)
	if err != nil {
		return time.Second, fmt.Errorf("built-in scaler: group %s: observe: %w", group, err)
	}
	d, err := r.scaleGroup(ctx, group, &obs)
	if err != nil {
		r.log.Error("built-in scaler: group pass failed", "group", group, "err", err)
		return 0, fmt.Errorf("built-in scaler: group %s: %w", group, err)
	}
	return d, nil
}

// scaleGroup is one group's pass: decide and append, then cordon the nodes
// the decision released (their ScaleDownRequested is in the log).
func (r *Reactors) scaleGroup(ctx context.Context, group string, obs *scale.Observation) (time.Duration, error) {
	var d scale.Decision
	if _, err := r.exec(ctx, "builtin", ScaleGroup{Group: group, Obs: obs, Out: &d}); err != nil {
		return 0, err
	}
	for _, slot := range d.Release {
		if err := r.cordon(ctx, slot, "", "built-in scaler released the node"); err != nil {
			return 0, err
		}
	}
	return d.Requeue, nil
}

// ScaleGroup is the built-in scaler's decider: scale.Decide over the
// group's views and one observation, written as one atomic batch: the
// ScaleDecided on the group (with the group's expectation) and the claims
// (IncreaseSize, call Decide) or scale-downs (DeleteNodes, call Decide) it
// implies. The hold's clock is the group's last recorded decision, so a
// restart keeps it. Out, when set, receives the decision.
type ScaleGroup struct {
	Group string
	Obs   *scale.Observation
	Out   *scale.Decision
}

func (c ScaleGroup) LockKey(*projections.State) string { return c.Group }

func (c ScaleGroup) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	g, ok := s.ActiveGroup(c.Group)
	if !ok || g.Spec.Scaler != events.ScalerBuiltin || c.Obs == nil {
		return nil, nil
	}
	sg := scale.Group{Name: g.Name, Options: scale.OptionsOf(g.Spec.Builtin), MaxSize: s.MaxSize(g.Name)}
	sg.Free = min(len(s.FreeSlots(g.Name, now)), s.MaxSize(g.Name)-s.LiveInService(g.Name))
	for _, cl := range s.LiveClaims(g.Name) {
		if !cl.WantsMachine() {
			continue
		}
		n := scale.Node{Slot: cl.Slot, Since: cl.RequestedAt, Manual: cl.Request.Call == events.CallManual}
		if sl := s.Slots[cl.Slot]; sl != nil {
			n.Name = sl.NodeName()
		}
		if cl.Phase == projections.PhaseReady {
			n.Ready = s.Slots[cl.Slot] != nil && s.Slots[cl.Slot].Node.Present
			if cl.ReadyAt != nil {
				n.Since = *cl.ReadyAt
			}
		}
		sg.Nodes = append(sg.Nodes, n)
	}
	if ld := g.LastDecision; ld != nil {
		sg.Last = &scale.Last{At: ld.At, Action: scale.Action(ld.Action), Slots: ld.Slots}
	}
	d := scale.Decide(*c.Obs, sg, now)
	// A floor the group declares is kept: never release under minSize.
	if len(d.Release) > 0 {
		if room := s.TargetSize(g.Name) - g.Spec.MinSize; room < len(d.Release) {
			d.Release = d.Release[:max(room, 0)]
			d.Slots = d.Release
			if len(d.Release) == 0 {
				d = scale.Decision{Action: scale.ActionNone, Demand: d.Demand, Target: d.Target, Nodes: d.Nodes, Reason: fmt.Sprintf("at minSize %d", g.Spec.MinSize)}
			}
		}
	}
	if c.Out != nil {
		*c.Out = d
	}
	demand := demandChange(g, *c.Obs, d, now)
	if !d.Record() {
		if demand == nil {
			return nil, nil
		}
		return []events.Write{{Aggregate: events.GroupAggregate(g.Name), Expected: g.Seq, Events: []events.Event{*demand}}}, nil
	}
	writes := []events.Write{{Aggregate: events.GroupAggregate(g.Name), Expected: g.Seq, Events: []events.Event{{Time: now, Data: events.ScaleDecided{
		Ref:    events.Ref{Group: g.Name, Cause: "built-in scaler: " + string(d.Action)},
		Demand: d.Demand, Target: d.Target, Nodes: d.Nodes, Action: string(d.Action), Reason: d.Reason, Slots: d.Slots,
	}}}}}
	if demand != nil {
		writes[0].Events = append(writes[0].Events, *demand)
	}
	switch {
	case d.Create > 0:
		ws, err := decide.IncreaseSize{Group: g.Name, Delta: d.Create, RequestedBy: BuiltinRequester, Call: events.CallDecide}.Decide(s, now)
		if err != nil {
			return nil, err
		}
		writes = decide.MergeWrites(append(writes, ws...))
	case len(d.Release) > 0:
		refs := make([]decide.NodeRef, len(d.Release))
		for i, slot := range d.Release {
			refs[i] = decide.NodeRef{Name: slot}
		}
		ws, err := decide.DeleteNodes{Group: g.Name, Nodes: refs, RequestedBy: BuiltinRequester, Call: events.CallDecide}.Decide(s, now)
		if err != nil {
			return nil, err
		}
		writes = decide.MergeWrites(append(writes, ws...))
	}
	return writes, nil
}
