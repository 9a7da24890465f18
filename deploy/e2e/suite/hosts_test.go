package suite

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/machines"
)

// A cloud instance whose Node is named by its provider: the startup Job
// reports ip-10-0-3-7 with its providerID; claimstream matches the Node
// that registers under that name, gates it, reports that providerID to
// cluster-autoscaler, and DeleteNodes by that Node powers it off and
// removes its Node. No Node under the slot's name appears, nothing is
// refused.
func TestHostUnderAnotherName(t *testing.T) {
	dumpOnFailure(t)
	w := watchNode(t, burstNode)
	from := len(model.EventsOf("burst-1"))
	increaseSize(t, "burst", 1)
	waitMachine(t, "burst-1", "reported", from, 60*time.Second)
	waitT(t, 90*time.Second, "the instance running under the reported providerID", func() (bool, string) {
		ins := instances(t, "burst")
		in := ins[burstProviderID]
		return in != nil && in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning, describeInstances(ins)
	})
	n, ok := node(t, burstNode)
	if !ok || !nodeReady(n) || hasTaint(n, readyTaint) || hasTaint(n, "claimstream.dev/refused") || n.Spec.Unschedulable {
		t.Fatalf("node %s: present=%v, want Ready, untainted, schedulable, not refused", burstNode, ok)
	}
	if n.Labels["claimstream.dev/group"] != "burst" {
		t.Fatalf("node %s labels %v: want the group's", burstNode, n.Labels)
	}
	if _, ok := node(t, "burst-1"); ok {
		t.Fatal("a Node under the slot's name appeared")
	}

	_, err := provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{
		Id:    "burst",
		Nodes: []*pb.ExternalGrpcNode{{Name: burstNode, ProviderID: burstProviderID}},
	})
	if err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	waitChan(t, w.cordoned, 30*time.Second, burstNode+" cordoned")
	waitMachine(t, "burst-1", "power-off", from, 60*time.Second)
	waitChan(t, w.deleted, 60*time.Second, "the powered-off Node "+burstNode+" deleted by claimstream")
	waitT(t, 30*time.Second, "claim completed: no instance left", func() (bool, string) {
		ins := instances(t, "burst")
		return len(ins) == 0, describeInstances(ins)
	})
}

// A slot named with 215 characters (a valid DNS subdomain, far past the 63
// of a label value) boots and shuts down against the real apiserver, which
// validates every label: the Jobs carry the slot's label shortened with a
// digest and its full name in an annotation.
func TestLongSlotNameBootsAndShutsDown(t *testing.T) {
	dumpOnFailure(t)
	if len(longSlot) < 200 {
		t.Fatalf("the long slot name has %d characters", len(longSlot))
	}
	w := watchNode(t, longSlot)
	from := len(model.EventsOf(longSlot))
	increaseSize(t, "long", 1)
	waitT(t, 90*time.Second, "the long-named slot's instance running", func() (bool, string) {
		ins := instances(t, "long")
		in := ins[providerID(longSlot)]
		return in != nil && in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning, describeInstances(ins)
	})
	var startup int
	for _, j := range jobs(t, map[string]string{lOp: "startup"}) {
		if machines.SlotOf(&j) != longSlot {
			continue
		}
		startup++
		if len(j.Name) > 63 || len(validation.IsDNS1123Subdomain(j.Name)) > 0 {
			t.Errorf("job name %q", j.Name)
		}
		if v := j.Labels[lSlot]; len(v) > 63 || len(validation.IsValidLabelValue(v)) > 0 {
			t.Errorf("job %s: slot label %q", j.Name, v)
		}
	}
	if startup != 1 {
		t.Fatalf("%d startup Jobs of the long-named slot, want 1", startup)
	}
	_, err := provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{
		Id:    "long",
		Nodes: []*pb.ExternalGrpcNode{{Name: longSlot, ProviderID: providerID(longSlot)}},
	})
	if err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	waitMachine(t, longSlot, "power-off", from, 60*time.Second)
	waitChan(t, w.deleted, 60*time.Second, "the powered-off long-named Node deleted by claimstream")
	waitT(t, 30*time.Second, "claim completed: no instance left", func() (bool, string) {
		ins := instances(t, "long")
		return len(ins) == 0, describeInstances(ins)
	})
}
