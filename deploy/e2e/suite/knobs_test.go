package suite

import (
	"testing"
	"time"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/machines"
)

// The machine model's other failure knobs. Both take a minute or more of
// claimstream's own timers, so they run in parallel, after the scenarios.

// A shutdown Job that exits 0 but leaves the machine up: claimstream fires
// the next shutdown Job after ShutdownSettle (1m), and the claim completes
// only when the machine is observed off.
func TestShutdownLeavesMachineUp(t *testing.T) {
	t.Parallel()
	dumpOnFailure(t)
	in := instances(t, "boot")[providerID("boot-1")]
	if in.GetStatus().GetInstanceState() != pb.InstanceStatus_instanceRunning {
		t.Skipf("needs boot-1 ready from TestScaleUpTwo: %v", describeInstances(instances(t, "boot")))
	}
	claim := jobs(t, map[string]string{lOp: "startup", lSlot: "boot-1"})[0].Labels[lClaim]
	from := len(model.EventsOf("boot-1"))
	model.SetKnobs("boot-1", machines.Knobs{ShutdownLeavesUp: true})
	w := watchNode(t, "boot-1")
	_, err := provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{
		Id: "boot", Nodes: []*pb.ExternalGrpcNode{{ProviderID: providerID("boot-1"), Name: "boot-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	first := waitMachine(t, "boot-1", "left-up", from, 60*time.Second)
	t.Logf("shutdown Job %s exited 0, the machine stayed up", first.Job)
	// The next shutdown works.
	model.SetKnobs("boot-1", machines.Knobs{})
	if in := instances(t, "boot")[providerID("boot-1")]; in.GetStatus().GetInstanceState() != pb.InstanceStatus_instanceDeleting {
		t.Errorf("with the machine still up the claim must still be scaling down: %v", describeInstances(instances(t, "boot")))
	}
	off := waitMachine(t, "boot-1", "power-off", from, 3*time.Minute)
	if off.Job == first.Job {
		t.Fatalf("powered off by the first Job %s", off.Job)
	}
	t.Logf("second shutdown Job %s powered the machine off %s after the first", off.Job, off.At.Sub(first.At).Round(time.Second))
	stops := jobs(t, map[string]string{lOp: "shutdown", lClaim: claim})
	if len(stops) != 2 {
		t.Errorf("shutdown Jobs of %s: %d, want 2", claim, len(stops))
	}
	waitChan(t, w.deleted, 60*time.Second, "the powered-off Node boot-1 deleted")
	waitT(t, 30*time.Second, "the claim completed: boot-1 no longer an instance", func() (bool, string) {
		ins := instances(t, "boot")
		return ins[providerID("boot-1")] == nil, describeInstances(ins)
	})
	if got := targetSize(t, "boot"); got != 0 {
		t.Fatalf("TargetSize(boot) = %d, want 0", got)
	}
}

// A ready claim's machine vanishes (no shutdown Job): claimstream observes it
// off; after one boot window (MachineGoneGrace, the group's 2m25s budget)
// the claim fails MachineGone and its machine is force-shut-down.
func TestMachineVanishes(t *testing.T) {
	t.Parallel()
	dumpOnFailure(t)
	in := instances(t, "crash")[providerID("crash-1")]
	if in.GetStatus().GetInstanceState() != pb.InstanceStatus_instanceRunning {
		t.Skipf("needs crash-1 ready from TestKillNineMidBoot: %v", describeInstances(instances(t, "crash")))
	}
	claim := jobs(t, map[string]string{lOp: "startup", lSlot: "crash-1"})[0].Labels[lClaim]
	start := time.Now()
	if err := model.PowerOff(ctxFor(t, 30*time.Second), "crash-1"); err != nil {
		t.Fatal(err)
	}
	var info *pb.InstanceErrorInfo
	waitT(t, 5*time.Minute, "the claim failed", func() (bool, string) {
		in := instances(t, "crash")[providerID("crash-1")]
		if e := in.GetStatus().GetErrorInfo(); e != nil {
			info = e
			return true, ""
		}
		return false, describeInstances(instances(t, "crash"))
	})
	took := time.Since(start)
	t.Logf("claim %s failed %s after %s: %s", claim, info.GetErrorCode(), took.Round(time.Second), info.GetErrorMessage())
	if info.GetErrorCode() != "MachineGone" {
		t.Errorf("reason %q, want MachineGone", info.GetErrorCode())
	}
	if took < 2*time.Minute {
		t.Errorf("failed after %s, before the machine-gone grace (2m25s)", took)
	}
	waitT(t, 30*time.Second, "a force shutdown Job for the claim", func() (bool, string) {
		return len(jobs(t, map[string]string{lOp: "shutdown", lClaim: claim})) > 0, ""
	})
	if got := targetSize(t, "crash"); got != 0 {
		t.Fatalf("TargetSize(crash) = %d, want 0", got)
	}
	waitT(t, 60*time.Second, "the powered-off Node crash-1 deleted", func() (bool, string) {
		_, ok := node(t, "crash-1")
		return !ok, ""
	})
}
