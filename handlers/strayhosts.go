package handlers

import (
	"context"
	"fmt"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// Stray hosts: Nodes that carry a managed group's label and are no slot of
// it are refused like a host nothing expects (refuseNode, reactor.go); the
// operator shuts their machines down.

// strayHosts refuses a Node that carries a managed group's label and is no
// slot of any group (by name or providerID, the hosts startup Jobs
// reported included). A stray already cordoned and tainted has been
// reported and acted on: it is left alone.
func (r *Reactors) strayHosts(ctx context.Context) error { return r.strayHostsOf(ctx, "") }

// NodeGroupLister is a Cluster that lists the Nodes carrying one LabelGroup
// value from an index (handlers/kube does), so one group's stray-host pass
// reads that group's Nodes, not the whole cluster's.
type NodeGroupLister interface {
	NodesLabelled(groupLabel string) []NodeView
}

// nodesOfGroup are the Nodes whose LabelGroup value may name group (its
// name or its LabelValue); every Node when group is "".
func (r *Reactors) nodesOfGroup(group string) []NodeView {
	l, ok := r.cluster.(NodeGroupLister)
	if group == "" || !ok {
		return r.cluster.Nodes()
	}
	nodes := l.NodesLabelled(group)
	if v := LabelValue(group); v != group {
		nodes = append(nodes, l.NodesLabelled(v)...)
	}
	return nodes
}

// strayHostsOf is strayHosts for the Nodes labelled for one group (the
// work queue's item "strays/<group>"); every group when group is "".
func (r *Reactors) strayHostsOf(ctx context.Context, only string) error {
	var errs []error
	for _, n := range r.nodesOfGroup(only) {
		label := n.Labels[LabelGroup]
		if label == "" || (n.Unschedulable && n.HasTaint(RefusedTaint)) {
			continue
		}
		known, managed, group := false, false, ""
		r.views.Read(func(s *projections.State) {
			_, known = s.SlotForNode(n.Name, n.ProviderID)
			group, managed = groupOfLabel(s, label)
		})
		if known || !managed || (only != "" && group != only) {
			continue
		}
		why := fmt.Sprintf("node %s (providerID %s) says group %s, which has no slot of that name or providerID", n.Name, n.ProviderID, group)
		if err := refuseNode(ctx, r.base, "hosts", decide.StrayHostsSlot(group), group, n, why); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stray hosts: %v", errs)
	}
	return nil
}

// groupOfLabel is the active group whose LabelGroup value is label (the
// group's name, or its LabelValue when the name is longer than a label).
func groupOfLabel(s *projections.State, label string) (string, bool) {
	if _, ok := s.ActiveGroup(label); ok {
		return label, true
	}
	for name, g := range s.Groups {
		if !g.Retired && LabelValue(name) == label {
			return name, true
		}
	}
	return "", false
}
