package provider

import (
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// A burst instance registered under the name and providerID its startup
// Job reported: cluster-autoscaler sees that providerID in NodeGroupNodes,
// maps the Node to its group and deletes it by it.
func TestHostUnderAnotherNameIsReportedAndMapped(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "burst", events.GroupSpec{}, slotsNamed("burst-1")...)
	c := boot(t, e.h, "burst-1")
	const node, pid = "ip-10-0-3-7", "aws:///eu-west-1a/i-0abc"
	e.h.MustExec(decide.ExpectHost{Claim: c, Node: node, ProviderID: pid, InstanceID: "i-0abc"})
	e.h.MustExec(decide.MarkReady{Claim: c, Node: node})

	r, err := e.c.NodeGroupNodes(e.ctx(), &pb.NodeGroupNodesRequest{Id: "burst"})
	if err != nil {
		t.Fatal(err)
	}
	if ins := r.GetInstances(); len(ins) != 1 || ins[0].GetId() != pid || ins[0].GetStatus().GetInstanceState() != pb.InstanceStatus_instanceRunning {
		t.Fatalf("instances %v, want one running %s", ins, pid)
	}
	for _, n := range []*pb.ExternalGrpcNode{{Name: node, ProviderID: pid}, {Name: node}, {ProviderID: pid}} {
		g, err := e.c.NodeGroupForNode(e.ctx(), &pb.NodeGroupForNodeRequest{Node: n})
		if err != nil || g.GetNodeGroup().GetId() != "burst" {
			t.Fatalf("NodeGroupForNode(%v) = %v, %v", n, g.GetNodeGroup(), err)
		}
	}
	if _, err := e.c.NodeGroupDeleteNodes(e.ctx(), &pb.NodeGroupDeleteNodesRequest{Id: "burst", Nodes: []*pb.ExternalGrpcNode{{Name: node, ProviderID: pid}}}); err != nil {
		t.Fatal(err)
	}
	e.h.Read(func(s *projections.State) {
		if cl := s.Claims[c]; cl.ScaleDown == nil {
			t.Fatalf("claim %s not marked for scale-down", c)
		}
	})
}
