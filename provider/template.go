package provider

import (
	"fmt"
	"maps"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

const (
	templateNamePrefix       = "template-"
	templateProviderIDPrefix = "homelab://template-"
	// defaultPods is the pods capacity of a template that declares none:
	// the kubelet's default maxPods. Without it cluster-autoscaler's
	// scheduler simulation fits no pod on the template.
	defaultPods = "110"
)

// templateInput is what the template node is built from, copied out of the
// views so the Node is built outside the views' lock.
type templateInput struct {
	group       string
	labels      map[string]string
	annotations map[string]string
	taints      []events.Taint
	capacity    map[string]string
	allocatable map[string]string
}

// templateInputOf reads a group's template; a template with no capacity
// takes the capacity of the group's first slot that declares one (and, with
// no template at all, that slot's labels and taints).
func templateInputOf(st *projections.State, g *projections.Group) (templateInput, error) {
	in := templateInput{group: g.Name}
	if t := g.Spec.Template; t != nil {
		in.labels = maps.Clone(t.Labels)
		in.annotations = maps.Clone(t.Annotations)
		in.taints = append([]events.Taint(nil), t.Taints...)
		in.capacity = maps.Clone(t.Capacity)
		in.allocatable = maps.Clone(t.Allocatable)
	}
	if len(in.capacity) == 0 {
		for _, name := range g.Slots {
			sl, ok := st.ActiveSlot(name)
			if !ok || len(sl.Spec.Capacity) == 0 {
				continue
			}
			in.capacity = maps.Clone(sl.Spec.Capacity)
			if g.Spec.Template == nil {
				in.labels = maps.Clone(sl.Spec.Labels)
				in.taints = append([]events.Taint(nil), sl.Spec.Taints...)
			}
			break
		}
	}
	if len(in.capacity) == 0 {
		return in, status.Errorf(codes.Unimplemented, "group %s declares no template and no slot capacity", g.Name)
	}
	return in, nil
}

// buildTemplateNode is the Node a new machine of the group registers as:
// Ready, with the template's labels (and the well-known defaults), taints,
// capacity and allocatable (allocatable defaults to capacity).
func buildTemplateNode(in templateInput, now time.Time) (*corev1.Node, error) {
	name := templateNamePrefix + in.group
	labels := map[string]string{}
	maps.Copy(labels, in.labels)
	for k, v := range map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	} {
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
	capacity, err := quantities(in.group, "capacity", in.capacity)
	if err != nil {
		return nil, err
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = resource.MustParse(defaultPods)
	}
	alloc, err := quantities(in.group, "allocatable", in.allocatable)
	if err != nil {
		return nil, err
	}
	allocatable := capacity.DeepCopy()
	maps.Copy(allocatable, alloc)

	var taints []corev1.Taint
	for _, t := range in.taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	ts := metav1.NewTime(now.UTC().Truncate(time.Second))
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: maps.Clone(in.annotations),
		},
		Spec: corev1.NodeSpec{
			ProviderID: templateProviderIDPrefix + in.group,
			Taints:     taints,
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{
				Type:               corev1.NodeReady,
				Status:             corev1.ConditionTrue,
				Reason:             "KubeletReady",
				Message:            "claimstream template node",
				LastHeartbeatTime:  ts,
				LastTransitionTime: ts,
			}},
		},
	}, nil
}

// quantities parses a declared resource list; a quantity that does not
// parse is the declaration's fault: FailedPrecondition naming the field.
func quantities(group, field string, in map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q, err := resource.ParseQuantity(in[k])
		if err != nil {
			return nil, status.Error(codes.FailedPrecondition, fmt.Sprintf("group %s template %s[%s]: %q is not a quantity: %v", group, field, k, in[k], err))
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}
