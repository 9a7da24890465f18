package kube

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/claimstream/claimstream/handlers"
)

// nodeGroupIndex indexes the Node cache by the LabelGroup value, so one
// group's stray-host pass reads its own Nodes and not a 10,000-Node list.
const nodeGroupIndex = "claimstream-group-label"

var _ handlers.NodeGroupLister = (*Cluster)(nil)

func indexNodesByGroup(nodes cache.SharedIndexInformer) error {
	err := nodes.AddIndexers(cache.Indexers{nodeGroupIndex: func(obj any) ([]string, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return nil, nil
		}
		if v := n.Labels[handlers.LabelGroup]; v != "" {
			return []string{v}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("index nodes by %s: %w", handlers.LabelGroup, err)
	}
	return nil
}

// NodesLabelled implements handlers.NodeGroupLister: the cached Nodes whose
// LabelGroup value is label, by name, as the adapter's own writes left them.
func (c *Cluster) NodesLabelled(label string) []handlers.NodeView {
	objs, err := c.nodes.GetIndexer().ByIndex(nodeGroupIndex, label)
	if err != nil {
		// The index is added in New; without it, the whole list filtered.
		var out []handlers.NodeView
		for _, n := range c.Nodes() {
			if n.Labels[handlers.LabelGroup] == label {
				out = append(out, n)
			}
		}
		return out
	}
	out := make([]handlers.NodeView, 0, len(objs))
	for _, obj := range objs {
		if n, ok := c.ownNode(obj.(*corev1.Node)); ok {
			out = append(out, NodeViewOf(n))
		}
	}
	slices.SortFunc(out, func(a, b handlers.NodeView) int { return strings.Compare(a.Name, b.Name) })
	return out
}
