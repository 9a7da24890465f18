package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
)

// NodeViewOf reads what the reactors need of a Node.
func NodeViewOf(n *corev1.Node) handlers.NodeView {
	v := handlers.NodeView{
		Name: n.Name, ProviderID: n.Spec.ProviderID, CreatedAt: n.CreationTimestamp.Time,
		Unschedulable: n.Spec.Unschedulable, Labels: n.Labels,
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			v.Ready = c.Status == corev1.ConditionTrue
			v.ReadySince = c.LastTransitionTime.Time
		}
	}
	for _, t := range n.Spec.Taints {
		v.Taints = append(v.Taints, events.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			v.Address = a.Address
			break
		}
	}
	return v
}

// TaintOf converts a declared taint.
func TaintOf(t events.Taint) corev1.Taint {
	return corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
}
