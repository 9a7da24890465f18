package provider

import (
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

func TestTemplateNodeInfo(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "big", events.GroupSpec{Template: &events.NodeTemplate{
		Labels:      map[string]string{"pool": "big", corev1.LabelArchStable: "arm64"},
		Annotations: map[string]string{"note": "x"},
		Taints:      []events.Taint{{Key: "dedicated", Value: "big", Effect: "NoSchedule"}},
		Capacity:    map[string]string{"cpu": "8", "memory": "32Gi"},
		Allocatable: map[string]string{"memory": "30Gi"},
	}}, slotsNamed("big-0")...)
	declare(t, e.h, "fromslot", events.GroupSpec{}, slotDecl{name: "fs-0"}, slotDecl{name: "fs-1", spec: events.SlotSpec{
		Capacity: map[string]string{"cpu": "4", "pods": "50"}, Labels: map[string]string{"disk": "ssd"},
		Taints: []events.Taint{{Key: "slow", Effect: "PreferNoSchedule"}},
	}})
	declare(t, e.h, "bare", events.GroupSpec{}, slotsNamed("bare-0")...)
	declare(t, e.h, "broken", events.GroupSpec{Template: &events.NodeTemplate{Capacity: map[string]string{"cpu": "lots"}}}, slotsNamed("br-0")...)

	r, err := e.c.NodeGroupTemplateNodeInfo(e.ctx(), &pb.NodeGroupTemplateNodeInfoRequest{Id: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.GetNodeInfo()) != string(r.GetNodeBytes()) || len(r.GetNodeBytes()) == 0 {
		t.Fatalf("nodeInfo (%d bytes) and nodeBytes (%d bytes) differ", len(r.GetNodeInfo()), len(r.GetNodeBytes()))
	}
	var n corev1.Node
	if err := n.Unmarshal(r.GetNodeBytes()); err != nil {
		t.Fatal(err)
	}
	if n.Name != "template-big" || n.Spec.ProviderID != "homelab://template-big" {
		t.Errorf("name %q providerID %q", n.Name, n.Spec.ProviderID)
	}
	for k, v := range map[string]string{"pool": "big", corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux", corev1.LabelHostname: "template-big"} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations["note"] != "x" {
		t.Errorf("annotations %v", n.Annotations)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != (corev1.Taint{Key: "dedicated", Value: "big", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	wantQ := func(l corev1.ResourceList, name corev1.ResourceName, want string) {
		t.Helper()
		q, ok := l[name]
		if !ok || q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("%s = %v, want %s", name, q.String(), want)
		}
	}
	wantQ(n.Status.Capacity, corev1.ResourceCPU, "8")
	wantQ(n.Status.Capacity, corev1.ResourceMemory, "32Gi")
	wantQ(n.Status.Capacity, corev1.ResourcePods, "110")
	wantQ(n.Status.Allocatable, corev1.ResourceCPU, "8")
	wantQ(n.Status.Allocatable, corev1.ResourceMemory, "30Gi")
	wantQ(n.Status.Allocatable, corev1.ResourcePods, "110")
	if len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Type != corev1.NodeReady || n.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("conditions %v", n.Status.Conditions)
	}

	// No template: the first slot that declares a capacity.
	r, err = e.c.NodeGroupTemplateNodeInfo(e.ctx(), &pb.NodeGroupTemplateNodeInfoRequest{Id: "fromslot"})
	if err != nil {
		t.Fatal(err)
	}
	n = corev1.Node{}
	if err := n.Unmarshal(r.GetNodeBytes()); err != nil {
		t.Fatal(err)
	}
	wantQ(n.Status.Allocatable, corev1.ResourceCPU, "4")
	wantQ(n.Status.Allocatable, corev1.ResourcePods, "50")
	if n.Labels["disk"] != "ssd" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "slow" {
		t.Errorf("slot labels/taints not used: %v %v", n.Labels, n.Spec.Taints)
	}

	_, err = e.c.NodeGroupTemplateNodeInfo(e.ctx(), &pb.NodeGroupTemplateNodeInfoRequest{Id: "bare"})
	wantCode(t, err, codes.Unimplemented, "group bare declares no template and no slot capacity")
	_, err = e.c.NodeGroupTemplateNodeInfo(e.ctx(), &pb.NodeGroupTemplateNodeInfoRequest{Id: "broken"})
	wantCode(t, err, codes.FailedPrecondition, "capacity[cpu]", "lots")
}

func ptr[T any](v T) *T { return &v }

func TestGetOptions(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "plain", events.GroupSpec{}, slotsNamed("p-0")...)
	declare(t, e.h, "slow", events.GroupSpec{MaxNodeProvisionTime: events.Duration(20 * time.Minute)}, slotsNamed("s-0")...)
	declare(t, e.h, "fast", events.GroupSpec{MaxNodeProvisionTime: events.Duration(5 * time.Minute)}, slotsNamed("f-0")...)
	declare(t, e.h, "tuned", events.GroupSpec{Autoscaling: &events.AutoscalingOptions{
		ScaleDownUtilizationThreshold: ptr(0.7),
		ScaleDownUnneededTime:         ptr(events.Duration(3 * time.Minute)),
		ZeroOrMaxNodeScaling:          ptr(true),
	}}, slotsNamed("t-0")...)
	bw := projections.BootWindow(events.GroupSpec{}) // 12m10s

	newDefaults := &pb.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.4, IgnoreDaemonSetsUtilization: true,
		ScaleDownUnneededDuration: durationpb.New(11 * time.Minute), ScaleDownUnreadyDuration: durationpb.New(21 * time.Minute),
		MaxNodeProvisionDuration: durationpb.New(16 * time.Minute),
	}
	oldDefaults := &pb.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.4, IgnoreDaemonSetsUtilization: true,
		ScaleDownUnneededTime: &pb.LegacyDuration{Duration: int64(11 * time.Minute)}, ScaleDownUnreadyTime: &pb.LegacyDuration{Duration: int64(21 * time.Minute)},
		MaxNodeProvisionTime: &pb.LegacyDuration{Duration: int64(16 * time.Minute)},
	}
	type want struct {
		util, gpu               float64
		zero, ignoreDS          bool
		unneeded, unready, prov time.Duration
	}
	for _, c := range []struct {
		name  string
		group string
		def   *pb.NodeGroupAutoscalingOptions
		want  want
	}{
		{"echo new defaults", "plain", newDefaults, want{0.5, 0.4, false, true, 11 * time.Minute, 21 * time.Minute, 16 * time.Minute}},
		{"echo old defaults", "plain", oldDefaults, want{0.5, 0.4, false, true, 11 * time.Minute, 21 * time.Minute, 16 * time.Minute}},
		{"group provision time", "slow", newDefaults, want{0.5, 0.4, false, true, 11 * time.Minute, 21 * time.Minute, 20 * time.Minute}},
		{"provision time below the budget", "fast", oldDefaults, want{0.5, 0.4, false, true, 11 * time.Minute, 21 * time.Minute, bw}},
		{"overrides", "tuned", newDefaults, want{0.7, 0.4, true, true, 3 * time.Minute, 21 * time.Minute, 16 * time.Minute}},
		{"nil defaults", "plain", nil, want{0.5, 0.5, false, false, 10 * time.Minute, 20 * time.Minute, bw}},
		{"empty defaults", "plain", &pb.NodeGroupAutoscalingOptions{}, want{0, 0, false, false, 10 * time.Minute, 20 * time.Minute, bw}},
		{"zero provision default", "plain", &pb.NodeGroupAutoscalingOptions{MaxNodeProvisionDuration: durationpb.New(0), ScaleDownUnneededDuration: durationpb.New(0)}, want{0, 0, false, false, 0, 20 * time.Minute, bw}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := e.c.NodeGroupGetOptions(e.ctx(), &pb.NodeGroupAutoscalingOptionsRequest{Id: c.group, Defaults: c.def})
			if err != nil {
				t.Fatal(err)
			}
			o := r.GetNodeGroupAutoscalingOptions()
			got := want{
				o.GetScaleDownUtilizationThreshold(), o.GetScaleDownGpuUtilizationThreshold(), o.GetZeroOrMaxNodeScaling(), o.GetIgnoreDaemonSetsUtilization(),
				o.GetScaleDownUnneededDuration().AsDuration(), o.GetScaleDownUnreadyDuration().AsDuration(), o.GetMaxNodeProvisionDuration().AsDuration(),
			}
			if got != c.want {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
			// Both encodings of every duration, always, and equal.
			for _, d := range []struct {
				old *pb.LegacyDuration
				new *durationpb.Duration
			}{
				{o.GetScaleDownUnneededTime(), o.GetScaleDownUnneededDuration()},
				{o.GetScaleDownUnreadyTime(), o.GetScaleDownUnreadyDuration()},
				{o.GetMaxNodeProvisionTime(), o.GetMaxNodeProvisionDuration()},
			} {
				if d.old == nil || d.new == nil || time.Duration(d.old.GetDuration()) != d.new.AsDuration() {
					t.Errorf("durations not filled in both encodings: %v / %v", d.old, d.new)
				}
			}
			if o.GetMaxNodeProvisionDuration().AsDuration() <= 0 {
				t.Error("zero provision time sent")
			}
		})
	}
}

func TestPricing(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "priced", events.GroupSpec{Template: &events.NodeTemplate{
		Capacity: map[string]string{"cpu": "2"}, Pricing: &events.Pricing{NodePerHour: 0.25, PodPerHour: 0.01},
	}}, slotsNamed("pr-0")...)
	declare(t, e.h, "free", events.GroupSpec{}, slotsNamed("fr-0")...)
	start := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Minute)

	price := func(n *pb.ExternalGrpcNode) (float64, error) {
		r, err := e.c.PricingNodePrice(e.ctx(), &pb.PricingNodePriceRequest{Node: n, StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end)})
		return r.GetPrice(), err
	}
	for _, n := range []*pb.ExternalGrpcNode{
		{Name: "pr-0", ProviderID: "homelab://pr-0"},
		{Name: "template-priced"},
		{Name: "template-node-for-priced-8812", ProviderID: "homelab://template-priced"},
		{Name: "template-node-for-priced-8812"},
	} {
		p, err := price(n)
		if err != nil || p != 0.375 {
			t.Errorf("price of %v = %v, %v; want 0.375", n, p, err)
		}
	}
	// The old layout's meta.v1.Time.
	r, err := e.c.PricingNodePrice(e.ctx(), &pb.PricingNodePriceRequest{Node: &pb.ExternalGrpcNode{Name: "pr-0"},
		StartTime: &pb.LegacyTime{Seconds: start.Unix()}, EndTime: &pb.LegacyTime{Seconds: end.Unix()}})
	if err != nil || r.GetPrice() != 0.375 {
		t.Errorf("legacy window: %v, %v", r.GetPrice(), err)
	}
	_, err = price(&pb.ExternalGrpcNode{Name: "fr-0"})
	wantCode(t, err, codes.Unimplemented, "free")
	_, err = price(&pb.ExternalGrpcNode{Name: "elsewhere", ProviderID: "aws:///i-1"})
	wantCode(t, err, codes.NotFound, "elsewhere")
	_, err = e.c.PricingNodePrice(e.ctx(), &pb.PricingNodePriceRequest{Node: &pb.ExternalGrpcNode{Name: "pr-0"}})
	wantCode(t, err, codes.InvalidArgument, "startTimestamp")
	_, err = e.c.PricingNodePrice(e.ctx(), &pb.PricingNodePriceRequest{Node: &pb.ExternalGrpcNode{Name: "pr-0"}, StartTimestamp: timestamppb.New(end), EndTimestamp: timestamppb.New(start)})
	wantCode(t, err, codes.InvalidArgument, "endTimestamp")
	_, err = e.c.PricingNodePrice(e.ctx(), &pb.PricingNodePriceRequest{})
	wantCode(t, err, codes.InvalidArgument, "node")

	pp, err := e.c.PricingPodPrice(e.ctx(), &pb.PricingPodPriceRequest{StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end)})
	if err != nil || pp.GetPrice() != 0.015 {
		t.Errorf("pod price = %v, %v", pp.GetPrice(), err)
	}
}

func TestPodPriceUnimplemented(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "priced", events.GroupSpec{Template: &events.NodeTemplate{Pricing: &events.Pricing{NodePerHour: 1}}}, slotsNamed("pr-0")...)
	_, err := e.c.PricingPodPrice(e.ctx(), &pb.PricingPodPriceRequest{StartTimestamp: timestamppb.Now(), EndTimestamp: timestamppb.Now()})
	wantCode(t, err, codes.Unimplemented, "podPerHour")
}

// The price expander is answered from the cost block the cost report reads:
// pricePerHour plus the energy of powerWatts for an hour, with a slot's
// override for a real node, for the template node the group's.
func TestPricingFromCost(t *testing.T) {
	e := newEnv(t, Options{})
	p := func(v float64) *float64 { return &v }
	e.h.DeclareWith("metered", events.GroupSpec{Cost: &events.Cost{PricePerHour: p(0.10), PowerWatts: p(200), EnergyPricePerKWh: p(0.30), Currency: "EUR"}},
		func(slot string) events.SlotSpec {
			ss := events.SlotSpec{ProviderID: "homelab://" + slot}
			if slot == "big-0" {
				ss.Cost = &events.Cost{PowerWatts: p(500)}
			}
			return ss
		}, "me-0", "big-0")
	start := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	end := start.Add(2 * time.Hour)
	for name, want := range map[string]float64{
		"me-0":             2 * (0.10 + 0.2*0.30), // 0.32
		"big-0":            2 * (0.10 + 0.5*0.30), // 0.50
		"template-metered": 2 * (0.10 + 0.2*0.30),
	} {
		r, err := e.c.PricingNodePrice(e.ctx(), &pb.PricingNodePriceRequest{Node: &pb.ExternalGrpcNode{Name: name}, StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end)})
		if err != nil || math.Abs(r.GetPrice()-want) > 1e-9 {
			t.Errorf("price of %s = %v, %v; want %v", name, r.GetPrice(), err, want)
		}
	}
}
