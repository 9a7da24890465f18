package externalgrpcpb

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/claimstream/claimstream/provider/internal/layouts/ca134"
	"github.com/claimstream/claimstream/provider/internal/layouts/ca135"
)

// These tests prove, with no server, that one encoding of our messages is
// read correctly by both client layouts (responses) and that both layouts'
// requests decode into our messages.

// recode marshals from and unmarshals the bytes into to, as a peer would.
func recode(t *testing.T, from, to proto.Message) {
	t.Helper()
	b, err := proto.Marshal(from)
	if err != nil {
		t.Fatalf("marshal %T: %v", from, err)
	}
	if err := proto.Unmarshal(b, to); err != nil {
		t.Fatalf("unmarshal into %T: %v", to, err)
	}
}

// Distinct values per field, so a swapped field number cannot pass.
const (
	unneeded  = 15 * time.Minute
	unready   = 20 * time.Minute
	provision = 25 * time.Minute
)

func dualOptions() *NodeGroupAutoscalingOptions {
	return &NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    0.5,
		ScaleDownGpuUtilizationThreshold: 0.25,
		ScaleDownUnneededTime:            &LegacyDuration{Duration: int64(unneeded)},
		ScaleDownUnreadyTime:             &LegacyDuration{Duration: int64(unready)},
		MaxNodeProvisionTime:             &LegacyDuration{Duration: int64(provision)},
		ZeroOrMaxNodeScaling:             true,
		IgnoreDaemonSetsUtilization:      true,
		ScaleDownUnneededDuration:        durationpb.New(unneeded),
		ScaleDownUnreadyDuration:         durationpb.New(unready),
		MaxNodeProvisionDuration:         durationpb.New(provision),
	}
}

func TestOptionsResponseReadByBothLayouts(t *testing.T) {
	resp := &NodeGroupAutoscalingOptionsResponse{NodeGroupAutoscalingOptions: dualOptions()}

	var old ca134.NodeGroupAutoscalingOptionsResponse
	recode(t, resp, &old)
	o := old.GetNodeGroupAutoscalingOptions()
	for _, c := range []struct {
		name string
		got  *ca134.Duration
		want time.Duration
	}{
		{"scaleDownUnneededTime", o.GetScaleDownUnneededTime(), unneeded},
		{"scaleDownUnreadyTime", o.GetScaleDownUnreadyTime(), unready},
		{"MaxNodeProvisionTime", o.GetMaxNodeProvisionTime(), provision},
	} {
		// CA <= 1.34 dereferences these without a nil check.
		if c.got == nil || time.Duration(c.got.GetDuration()) != c.want {
			t.Errorf("ca134 %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if o.GetScaleDownUtilizationThreshold() != 0.5 || o.GetScaleDownGpuUtilizationThreshold() != 0.25 ||
		!o.GetZeroOrMaxNodeScaling() || !o.GetIgnoreDaemonSetsUtilization() {
		t.Errorf("ca134 scalars: %v", o)
	}
	// The new fields are unknown to an old client, not misread.
	if len(o.ProtoReflect().GetUnknown()) == 0 {
		t.Error("ca134: expected fields 8-10 as unknown fields")
	}

	var neu ca135.NodeGroupAutoscalingOptionsResponse
	recode(t, resp, &neu)
	n := neu.GetNodeGroupAutoscalingOptions()
	for _, c := range []struct {
		name string
		got  *durationpb.Duration
		want time.Duration
	}{
		{"scaleDownUnneededDuration", n.GetScaleDownUnneededDuration(), unneeded},
		{"scaleDownUnreadyDuration", n.GetScaleDownUnreadyDuration(), unready},
		{"MaxNodeProvisionDuration", n.GetMaxNodeProvisionDuration(), provision},
	} {
		if c.got == nil || c.got.AsDuration() != c.want {
			t.Errorf("ca135 %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if n.GetScaleDownUtilizationThreshold() != 0.5 || n.GetScaleDownGpuUtilizationThreshold() != 0.25 ||
		!n.GetZeroOrMaxNodeScaling() || !n.GetIgnoreDaemonSetsUtilization() {
		t.Errorf("ca135 scalars: %v", n)
	}
}

// TestLegacyDurationIsMetaV1Duration checks our LegacyDuration against the
// real k8s meta.v1.Duration encoder, and that google.protobuf.Duration is
// NOT a substitute (its field 1 is seconds, read as nanoseconds).
func TestLegacyDurationIsMetaV1Duration(t *testing.T) {
	k8s, err := (&metav1.Duration{Duration: unneeded}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := proto.Marshal(&LegacyDuration{Duration: int64(unneeded)})
	if err != nil {
		t.Fatal(err)
	}
	if string(k8s) != string(ours) {
		t.Errorf("meta.v1.Duration bytes %x, LegacyDuration bytes %x", k8s, ours)
	}

	var misread ca134.Duration
	recode(t, durationpb.New(unneeded), &misread)
	if time.Duration(misread.GetDuration()) == unneeded {
		t.Error("google.protobuf.Duration unexpectedly reads as meta.v1.Duration")
	}
}

func TestTemplateNodeInfoReadByBothLayouts(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "template-pool-a", Labels: map[string]string{"pool": "a"}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
		}},
	}
	nodeBytes, err := node.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	resp := &NodeGroupTemplateNodeInfoResponse{NodeInfo: nodeBytes, NodeBytes: nodeBytes}

	// The old layout's field 1 is an embedded v1.Node: on the wire a
	// length-delimited field whose payload is the Node's own encoding.
	wire, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	num, typ, n := protowire.ConsumeTag(wire)
	payload, m := protowire.ConsumeBytes(wire[n:])
	if num != 1 || typ != protowire.BytesType || m < 0 || string(payload) != string(nodeBytes) {
		t.Fatalf("field 1 is not the embedded Node (num %d, type %d)", num, typ)
	}

	check := func(layout string, b []byte) {
		t.Helper()
		var got corev1.Node
		if err := got.Unmarshal(b); err != nil {
			t.Fatalf("%s: unmarshal v1.Node: %v", layout, err)
		}
		cpu := got.Status.Capacity[corev1.ResourceCPU]
		if got.Name != node.Name || got.Labels["pool"] != "a" || cpu.String() != "4" {
			t.Errorf("%s: got node %q labels %v cpu %s", layout, got.Name, got.Labels, cpu.String())
		}
	}
	var old ca134.NodeGroupTemplateNodeInfoResponse
	recode(t, resp, &old)
	check("ca134 nodeInfo", old.GetNodeInfo())
	var neu ca135.NodeGroupTemplateNodeInfoResponse
	recode(t, resp, &neu)
	check("ca135 nodeBytes", neu.GetNodeBytes())
}

func TestPricingNodePriceRequestFromBothLayouts(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	node := &ca134.ExternalGrpcNode{ProviderID: "pool-a://m1", Name: "m1"}

	// An old CA encodes meta.v1.Time; check our LegacyTime against the real
	// encoder first.
	k8sStart, err := (&metav1.Time{Time: start}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var lt LegacyTime
	if err := proto.Unmarshal(k8sStart, &lt); err != nil || lt.GetSeconds() != start.Unix() {
		t.Fatalf("meta.v1.Time bytes %x read as %v (%v)", k8sStart, &lt, err)
	}

	var fromOld PricingNodePriceRequest
	recode(t, &ca134.PricingNodePriceRequest{
		Node:      node,
		StartTime: &ca134.Time{Seconds: start.Unix()},
		EndTime:   &ca134.Time{Seconds: end.Unix()},
	}, &fromOld)
	if fromOld.GetNode().GetProviderID() != "pool-a://m1" ||
		fromOld.GetStartTime().GetSeconds() != start.Unix() || fromOld.GetEndTime().GetSeconds() != end.Unix() ||
		fromOld.GetStartTimestamp() != nil || fromOld.GetEndTimestamp() != nil {
		t.Errorf("old request decoded as %v", &fromOld)
	}

	var fromNew PricingNodePriceRequest
	recode(t, &ca135.PricingNodePriceRequest{
		Node:           &ca135.ExternalGrpcNode{ProviderID: "pool-a://m1", Name: "m1"},
		StartTimestamp: timestamppb.New(start),
		EndTimestamp:   timestamppb.New(end),
	}, &fromNew)
	if fromNew.GetNode().GetProviderID() != "pool-a://m1" ||
		!fromNew.GetStartTimestamp().AsTime().Equal(start) || !fromNew.GetEndTimestamp().AsTime().Equal(end) ||
		fromNew.GetStartTime() != nil || fromNew.GetEndTime() != nil {
		t.Errorf("new request decoded as %v", &fromNew)
	}
}

func TestPricingPodPriceRequestFromBothLayouts(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}}
	podBytes, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	podName := func(b []byte) string {
		var p corev1.Pod
		if err := p.Unmarshal(b); err != nil {
			t.Fatalf("unmarshal v1.Pod: %v", err)
		}
		return p.Namespace + "/" + p.Name
	}

	var fromOld PricingPodPriceRequest
	recode(t, &ca134.PricingPodPriceRequest{
		Pod:       podBytes,
		StartTime: &ca134.Time{Seconds: start.Unix()},
		EndTime:   &ca134.Time{Seconds: end.Unix()},
	}, &fromOld)
	if podName(fromOld.GetPod()) != "default/web-0" || len(fromOld.GetPodBytes()) != 0 ||
		fromOld.GetStartTime().GetSeconds() != start.Unix() || fromOld.GetEndTime().GetSeconds() != end.Unix() ||
		fromOld.GetStartTimestamp() != nil {
		t.Errorf("old request decoded as %v", &fromOld)
	}

	var fromNew PricingPodPriceRequest
	recode(t, &ca135.PricingPodPriceRequest{
		PodBytes:       podBytes,
		StartTimestamp: timestamppb.New(start),
		EndTimestamp:   timestamppb.New(end),
	}, &fromNew)
	if podName(fromNew.GetPodBytes()) != "default/web-0" || len(fromNew.GetPod()) != 0 ||
		!fromNew.GetStartTimestamp().AsTime().Equal(start) || !fromNew.GetEndTimestamp().AsTime().Equal(end) ||
		fromNew.GetStartTime() != nil {
		t.Errorf("new request decoded as %v", &fromNew)
	}
}

// TestOptionsRequestDefaultsFromBothLayouts: CA sends its defaults in its own
// duration fields, which the server must echo for fields it does not override.
func TestOptionsRequestDefaultsFromBothLayouts(t *testing.T) {
	var fromOld NodeGroupAutoscalingOptionsRequest
	recode(t, &ca134.NodeGroupAutoscalingOptionsRequest{Id: "a", Defaults: &ca134.NodeGroupAutoscalingOptions{
		ScaleDownUnneededTime: &ca134.Duration{Duration: int64(unneeded)},
		ScaleDownUnreadyTime:  &ca134.Duration{Duration: int64(unready)},
		MaxNodeProvisionTime:  &ca134.Duration{Duration: int64(provision)},
	}}, &fromOld)
	d := fromOld.GetDefaults()
	if time.Duration(d.GetScaleDownUnneededTime().GetDuration()) != unneeded ||
		time.Duration(d.GetScaleDownUnreadyTime().GetDuration()) != unready ||
		time.Duration(d.GetMaxNodeProvisionTime().GetDuration()) != provision ||
		d.GetScaleDownUnneededDuration() != nil {
		t.Errorf("old defaults decoded as %v", d)
	}

	var fromNew NodeGroupAutoscalingOptionsRequest
	recode(t, &ca135.NodeGroupAutoscalingOptionsRequest{Id: "a", Defaults: &ca135.NodeGroupAutoscalingOptions{
		ScaleDownUnneededDuration: durationpb.New(unneeded),
		ScaleDownUnreadyDuration:  durationpb.New(unready),
		MaxNodeProvisionDuration:  durationpb.New(provision),
	}}, &fromNew)
	d = fromNew.GetDefaults()
	if d.GetScaleDownUnneededDuration().AsDuration() != unneeded ||
		d.GetScaleDownUnreadyDuration().AsDuration() != unready ||
		d.GetMaxNodeProvisionDuration().AsDuration() != provision ||
		d.GetScaleDownUnneededTime() != nil {
		t.Errorf("new defaults decoded as %v", d)
	}
}

// TestSchemaCoversBothLayouts checks descriptors, not bytes: every method,
// message, field (name, number, kind, cardinality, type) and enum value of
// each layout exists identically in our schema, and every field of ours comes
// from at least one layout. ca134's Duration/Time are our LegacyDuration/LegacyTime.
func TestSchemaCoversBothLayouts(t *testing.T) {
	ourPkg := string(File_externalgrpc_proto.Package())
	rel := func(d protoreflect.Descriptor) string {
		return strings.TrimPrefix(string(d.FullName()), string(d.ParentFile().Package())+".")
	}
	ours := func(layout protoreflect.Descriptor) protoreflect.Descriptor {
		if !strings.HasPrefix(string(layout.FullName()), "ca13") {
			return layout // well-known type
		}
		name := map[string]string{"Duration": "LegacyDuration", "Time": "LegacyTime"}[rel(layout)]
		if name == "" || layout.ParentFile().Package() != "ca134.externalgrpc" {
			name = rel(layout)
		}
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(ourPkg + "." + name))
		if err != nil {
			t.Errorf("%s: not in our schema", layout.FullName())
			return nil
		}
		return d
	}
	covered := map[protoreflect.FullName]bool{}
	var walk func(m protoreflect.MessageDescriptor)
	walk = func(m protoreflect.MessageDescriptor) {
		o, _ := ours(m).(protoreflect.MessageDescriptor)
		if o == nil {
			return
		}
		for i := 0; i < m.Fields().Len(); i++ {
			f := m.Fields().Get(i)
			of := o.Fields().ByNumber(f.Number())
			if of == nil || of.Name() != f.Name() || of.Kind() != f.Kind() || of.Cardinality() != f.Cardinality() {
				t.Errorf("%s: field %d %s differs in our %s", m.FullName(), f.Number(), f.Name(), o.FullName())
				continue
			}
			covered[of.FullName()] = true
			var lt, ot protoreflect.Descriptor
			if f.Message() != nil {
				lt, ot = f.Message(), of.Message()
			} else if f.Enum() != nil {
				lt, ot = f.Enum(), of.Enum()
			}
			if lt != nil && ours(lt) != ot {
				t.Errorf("%s.%s: type %s, ours %s", m.FullName(), f.Name(), lt.FullName(), ot.FullName())
			}
		}
		for i := 0; i < m.Enums().Len(); i++ {
			e := m.Enums().Get(i)
			oe, _ := ours(e).(protoreflect.EnumDescriptor)
			for j := 0; oe != nil && j < e.Values().Len(); j++ {
				v := e.Values().Get(j)
				if ov := oe.Values().ByNumber(v.Number()); ov == nil || ov.Name() != v.Name() {
					t.Errorf("%s: value %s=%d differs in ours", e.FullName(), v.Name(), v.Number())
				}
			}
			if oe != nil && oe.Values().Len() != e.Values().Len() {
				t.Errorf("%s: %d values, ours %d", e.FullName(), e.Values().Len(), oe.Values().Len())
			}
		}
		for i := 0; i < m.Messages().Len(); i++ {
			walk(m.Messages().Get(i))
		}
	}
	ourSvc := File_externalgrpc_proto.Services().Get(0)
	for _, layout := range []protoreflect.FileDescriptor{ca134.File_ca134_ca134_proto, ca135.File_ca135_ca135_proto} {
		svc := layout.Services().Get(0)
		if svc.Methods().Len() != ourSvc.Methods().Len() {
			t.Errorf("%s: %d methods, ours %d", svc.FullName(), svc.Methods().Len(), ourSvc.Methods().Len())
		}
		for i := 0; i < svc.Methods().Len() && i < ourSvc.Methods().Len(); i++ {
			lm, om := svc.Methods().Get(i), ourSvc.Methods().Get(i)
			if lm.Name() != om.Name() || ours(lm.Input()) != om.Input() || ours(lm.Output()) != om.Output() {
				t.Errorf("method %d: %s %s, ours %s", i, svc.FullName(), lm.Name(), om.Name())
			}
		}
		for i := 0; i < layout.Messages().Len(); i++ {
			walk(layout.Messages().Get(i))
		}
	}
	// Fields only we have would be invisible to every client.
	var check func(m protoreflect.MessageDescriptor)
	check = func(m protoreflect.MessageDescriptor) {
		for i := 0; i < m.Fields().Len(); i++ {
			if f := m.Fields().Get(i); !covered[f.FullName()] {
				t.Errorf("our field %s is in neither layout", f.FullName())
			}
		}
		for i := 0; i < m.Messages().Len(); i++ {
			check(m.Messages().Get(i))
		}
	}
	for i := 0; i < File_externalgrpc_proto.Messages().Len(); i++ {
		check(File_externalgrpc_proto.Messages().Get(i))
	}
}
