package provider

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// TestDrainWaitingPastItsTimeoutIsReportedDeleting: under the drain policy
// wait a machine may stay up past its drain timeout while its pods end.
// cluster-autoscaler sees it as it is: out of the target size, and its
// instance deleting (not gone) until the machine is off.
func TestDrainWaitingPastItsTimeoutIsReportedDeleting(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed("n-0")...)
	claim := ready(t, e.h, "n-0")
	if _, err := e.c.NodeGroupDeleteNodes(e.ctx(), &pb.NodeGroupDeleteNodesRequest{Id: "workers", Nodes: []*pb.ExternalGrpcNode{{Name: "n-0"}}}); err != nil {
		t.Fatal(err)
	}
	e.h.MustExec(decide.StartDrain{Claim: claim, Node: "n-0", Pods: []string{"ci/build"}, Timeout: time.Minute, Policy: events.DrainWait})
	e.h.Clock.Step(time.Hour)
	e.h.MustExec(decide.TimeOutDrain{Claim: claim, Remaining: []string{"ci/build"}})

	if n := targetSize(t, e, "workers"); n != 0 {
		t.Fatalf("target size %d while the drain waits, want 0", n)
	}
	got := listInstances(t, e)["homelab://n-0"]
	if got == nil || got.GetStatus().GetInstanceState() != pb.InstanceStatus_instanceDeleting || got.GetStatus().GetErrorInfo() != nil {
		t.Fatalf("instance %v while the drain waits past its timeout, want instanceDeleting without errorInfo", got)
	}
}
