package provider

import (
	"context"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// TestDeletedFailedInstanceLeavesNodeGroupNodes plays cluster-autoscaler's
// sequence over gRPC: IncreaseSize, the boot fails, NodeGroupNodes lists
// the instance with errorInfo, CA deletes it (DeleteNodes with its fake
// node: name and providerID the instance id); from then on the instance is
// not listed, so CA does not delete it again every loop, the target size
// stays right, and a repeated DeleteNodes is a clean no-op. The log says
// how the instance ended.
func TestDeletedFailedInstanceLeavesNodeGroupNodes(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed("n-0", "n-1")...)

	if _, err := e.c.NodeGroupIncreaseSize(e.ctx(), &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	claim := mustLive(t, e.h, "n-0")
	e.h.MustExec(decide.BootClaim{Claim: claim})
	e.h.MustExec(decide.FailClaim{Claim: claim, Reason: projections.ReasonStartupJobFailed, Message: "startup Job exited 1", ForceShutdown: true})

	failed := listInstances(t, e)
	if got := failed["homelab://n-0"]; got == nil || got.GetStatus().GetErrorInfo().GetErrorCode() != projections.ReasonStartupJobFailed {
		t.Fatalf("after the failed boot: instances %v, want homelab://n-0 with errorInfo StartupJobFailed", failed)
	}
	if n := targetSize(t, e, "workers"); n != 0 {
		t.Fatalf("target size %d after the failed boot, want 0", n)
	}

	fake := &pb.ExternalGrpcNode{Name: "homelab://n-0", ProviderID: "homelab://n-0"}
	del := func() {
		t.Helper()
		if _, err := e.c.NodeGroupDeleteNodes(e.ctx(), &pb.NodeGroupDeleteNodesRequest{Id: "workers", Nodes: []*pb.ExternalGrpcNode{fake}}); err != nil {
			t.Fatalf("DeleteNodes of the failed instance: %v", err)
		}
	}
	del()
	if got := listInstances(t, e); len(got) != 0 {
		t.Fatalf("after DeleteNodes of the failed instance: instances %v, want none", got)
	}
	if n := targetSize(t, e, "workers"); n != 0 {
		t.Fatalf("target size %d after DeleteNodes, want 0", n)
	}
	seq := e.h.Views.Seq()
	del()
	if got := e.h.Views.Seq(); got != seq {
		t.Fatalf("a second DeleteNodes of the deleted instance wrote to the log (seq %d -> %d)", seq, got)
	}
	if got := listInstances(t, e); len(got) != 0 {
		t.Fatalf("after the second DeleteNodes: instances %v, want none", got)
	}

	// The log answers how it ended.
	var ended []events.Type
	err := e.h.Store.ReadAggregate(context.Background(), events.SlotAggregate("n-0"), func(ev events.Event) error {
		if ev.Data != nil && ev.Data.Reference().Claim == claim {
			ended = append(ended, ev.Type)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ended) == 0 || ended[len(ended)-1] != events.TypeFailedInstanceDeleted {
		t.Fatalf("claim %s's events %v, want the last to be %s", claim, ended, events.TypeFailedInstanceDeleted)
	}

	// The slot is free: a new IncreaseSize claims it again.
	if _, err := e.c.NodeGroupIncreaseSize(e.ctx(), &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 2}); err != nil {
		t.Fatal(err)
	}
	if n := targetSize(t, e, "workers"); n != 2 {
		t.Fatalf("target size %d after IncreaseSize(+2), want 2", n)
	}
}

func listInstances(t *testing.T, e *env) map[string]*pb.Instance {
	t.Helper()
	r, err := e.c.NodeGroupNodes(e.ctx(), &pb.NodeGroupNodesRequest{Id: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*pb.Instance{}
	for _, in := range r.GetInstances() {
		out[in.GetId()] = in
	}
	return out
}
