package provider

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/provider/internal/layouts/ca134"
	"github.com/claimstream/claimstream/provider/internal/layouts/ca135"
)

// TestWireBothLayouts calls the running server as a CA <= 1.34 and as a CA
// >= 1.35 would, with each layout's own message types on the real method
// paths, and checks each reads correct values from its own fields.
func TestWireBothLayouts(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{
		MaxNodeProvisionTime: events.Duration(25 * time.Minute),
		Template:             &events.NodeTemplate{Capacity: map[string]string{"cpu": "4", "memory": "8Gi"}},
	}, slotsNamed("w-0", "w-1", "w-2")...)
	ready(t, e.h, "w-0")
	claimSlot(t, e.h, "w-1")

	const unneeded, unready = 13 * time.Minute, 23 * time.Minute
	const provision = 25 * time.Minute // the group's own: max(budget, 25m)

	t.Run("ca134", func(t *testing.T) {
		var opts ca134.NodeGroupAutoscalingOptionsResponse
		err := ca134.Invoke(e.ctx(), e.cc, "NodeGroupGetOptions", &ca134.NodeGroupAutoscalingOptionsRequest{Id: "workers", Defaults: &ca134.NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5,
			ScaleDownUnneededTime: &ca134.Duration{Duration: int64(unneeded)},
			ScaleDownUnreadyTime:  &ca134.Duration{Duration: int64(unready)},
			MaxNodeProvisionTime:  &ca134.Duration{Duration: int64(15 * time.Minute)},
		}}, &opts)
		if err != nil {
			t.Fatal(err)
		}
		o := opts.GetNodeGroupAutoscalingOptions()
		// CA <= 1.34 dereferences these three with no nil check.
		for _, c := range []struct {
			name string
			got  *ca134.Duration
			want time.Duration
		}{
			{"scaleDownUnneededTime", o.GetScaleDownUnneededTime(), unneeded},
			{"scaleDownUnreadyTime", o.GetScaleDownUnreadyTime(), unready},
			{"MaxNodeProvisionTime", o.GetMaxNodeProvisionTime(), provision},
		} {
			if c.got == nil || time.Duration(c.got.GetDuration()) != c.want {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		if o.GetScaleDownUtilizationThreshold() != 0.5 {
			t.Errorf("threshold = %v", o.GetScaleDownUtilizationThreshold())
		}

		var tmpl ca134.NodeGroupTemplateNodeInfoResponse
		if err := ca134.Invoke(e.ctx(), e.cc, "NodeGroupTemplateNodeInfo", &ca134.NodeGroupTemplateNodeInfoRequest{Id: "workers"}, &tmpl); err != nil {
			t.Fatal(err)
		}
		var n corev1.Node
		if err := n.Unmarshal(tmpl.GetNodeInfo()); err != nil {
			t.Fatalf("ca134 nodeInfo: %v", err)
		}
		if n.Name != "template-workers" || n.Status.Capacity.Cpu().Value() != 4 {
			t.Errorf("ca134 node %s cpu %v", n.Name, n.Status.Capacity.Cpu())
		}

		var ts ca134.NodeGroupTargetSizeResponse
		if err := ca134.Invoke(e.ctx(), e.cc, "NodeGroupTargetSize", &ca134.NodeGroupTargetSizeRequest{Id: "workers"}, &ts); err != nil || ts.GetTargetSize() != 2 {
			t.Errorf("ca134 target = %d, %v", ts.GetTargetSize(), err)
		}
		var nodes ca134.NodeGroupNodesResponse
		if err := ca134.Invoke(e.ctx(), e.cc, "NodeGroupNodes", &ca134.NodeGroupNodesRequest{Id: "workers"}, &nodes); err != nil {
			t.Fatal(err)
		}
		got := map[string]ca134.InstanceStatus_InstanceState{}
		for _, in := range nodes.GetInstances() {
			got[in.GetId()] = in.GetStatus().GetInstanceState()
		}
		if len(got) != 2 || got["homelab://w-0"] != ca134.InstanceStatus_instanceRunning || got["homelab://w-1"] != ca134.InstanceStatus_instanceCreating {
			t.Errorf("ca134 instances = %v", got)
		}
	})

	t.Run("ca135", func(t *testing.T) {
		var opts ca135.NodeGroupAutoscalingOptionsResponse
		err := ca135.Invoke(e.ctx(), e.cc, "NodeGroupGetOptions", &ca135.NodeGroupAutoscalingOptionsRequest{Id: "workers", Defaults: &ca135.NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5,
			ScaleDownUnneededDuration: durationpb.New(unneeded),
			ScaleDownUnreadyDuration:  durationpb.New(unready),
			MaxNodeProvisionDuration:  durationpb.New(15 * time.Minute),
		}}, &opts)
		if err != nil {
			t.Fatal(err)
		}
		o := opts.GetNodeGroupAutoscalingOptions()
		for _, c := range []struct {
			name string
			got  *durationpb.Duration
			want time.Duration
		}{
			{"scaleDownUnneededDuration", o.GetScaleDownUnneededDuration(), unneeded},
			{"scaleDownUnreadyDuration", o.GetScaleDownUnreadyDuration(), unready},
			{"MaxNodeProvisionDuration", o.GetMaxNodeProvisionDuration(), provision},
		} {
			if c.got == nil || c.got.AsDuration() != c.want {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}

		var tmpl ca135.NodeGroupTemplateNodeInfoResponse
		if err := ca135.Invoke(e.ctx(), e.cc, "NodeGroupTemplateNodeInfo", &ca135.NodeGroupTemplateNodeInfoRequest{Id: "workers"}, &tmpl); err != nil {
			t.Fatal(err)
		}
		var n corev1.Node
		if err := n.Unmarshal(tmpl.GetNodeBytes()); err != nil {
			t.Fatalf("ca135 nodeBytes: %v", err)
		}
		if n.Name != "template-workers" || n.Status.Allocatable.Memory().String() != "8Gi" {
			t.Errorf("ca135 node %s memory %v", n.Name, n.Status.Allocatable.Memory())
		}

		var ts ca135.NodeGroupTargetSizeResponse
		if err := ca135.Invoke(e.ctx(), e.cc, "NodeGroupTargetSize", &ca135.NodeGroupTargetSizeRequest{Id: "workers"}, &ts); err != nil || ts.GetTargetSize() != 2 {
			t.Errorf("ca135 target = %d, %v", ts.GetTargetSize(), err)
		}
		var nodes ca135.NodeGroupNodesResponse
		if err := ca135.Invoke(e.ctx(), e.cc, "NodeGroupNodes", &ca135.NodeGroupNodesRequest{Id: "workers"}, &nodes); err != nil {
			t.Fatal(err)
		}
		got := map[string]ca135.InstanceStatus_InstanceState{}
		for _, in := range nodes.GetInstances() {
			got[in.GetId()] = in.GetStatus().GetInstanceState()
		}
		if len(got) != 2 || got["homelab://w-0"] != ca135.InstanceStatus_instanceRunning || got["homelab://w-1"] != ca135.InstanceStatus_instanceCreating {
			t.Errorf("ca135 instances = %v", got)
		}
	})
}
