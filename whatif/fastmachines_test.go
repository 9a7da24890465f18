package whatif_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/whatif"
)

// Machines that boot, clear their readiness gate and shut down in seconds
// (as the e2e suite's on a real control plane) replay in the seconds they
// took, not in the simulator's default stages (a 20s Job, 20s to Ready,
// 15s for the readiness taints): under the same config the replay comes to
// the recorded claims, boots, machine-hours and time to ready. The e2e
// pool's startup Job timeout (20s) would fail every replayed boot that
// took the default Job's 20s.
func TestReplayOfMachinesThatBootInSeconds(t *testing.T) {
	yaml := poolYAML(events.ScalerClusterAutoscaler, 3, 3, 0)
	// The e2e pool's lifecycle and readiness taint.
	yaml = strings.Replace(yaml, "    readinessTaints: []\n", "    readinessTaints: [{key: example.com/not-ready, effect: NoExecute}]\n    lifecycle: {startupJobTimeout: 20s, registrationWait: 10s, readinessGate: 15s}\n", 1)
	r := newRecorder(t, yaml, sim.Timing{JobDuration: 2 * time.Second, BootDelay: time.Second, ReadyDelay: time.Second, TaintDelay: 3 * time.Second, PowerOffDelay: time.Second})
	from := r.h.Clock.Now()
	ca := func(cmd decide.Command) {
		if _, err := r.h.Service.Execute(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	ca(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "cluster-autoscaler"})
	r.runFor(t, time.Minute)
	ca(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"})
	r.runFor(t, 2*time.Minute)
	ca(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "m-0"}, {Name: "m-1"}, {Name: "m-2"}}, RequestedBy: "cluster-autoscaler"})
	r.runFor(t, time.Minute)
	to := r.h.Clock.Now()

	rep, err := whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: to, Seed: 1,
		Candidates: []whatif.Candidate{{Name: "same.yaml", Config: parsePool(t, "same.yaml", yaml)}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := rep.Recorded
	t.Logf("recorded %+v", rec)
	if rec.Claims != 3 || rec.Boots != 3 || rec.FailedBoots != 0 || rec.TimeToReadyP95 > 10*time.Second {
		t.Fatalf("the recording itself: %+v; want 3 claims, 3 boots ready within seconds", rec)
	}
	for _, o := range []whatif.Outcome{rep.Baseline, rep.Candidates[0]} {
		t.Logf("%s %+v", o.Name, o)
		if o.Claims != rec.Claims || o.Boots != rec.Boots || o.FailedBoots != rec.FailedBoots {
			t.Errorf("%s: claims %d boots %d failed %d; recorded %d %d %d", o.Name, o.Claims, o.Boots, o.FailedBoots, rec.Claims, rec.Boots, rec.FailedBoots)
		}
		if diff := o.MachineHours/rec.MachineHours - 1; diff > 0.02 || diff < -0.02 {
			t.Errorf("%s: %.3f machine-hours, recorded %.3f (%+.1f%%)", o.Name, o.MachineHours, rec.MachineHours, 100*diff)
		}
		// The recorded machines boot without jitter: so does their model.
		if o.TimeToReadyP50 != rec.TimeToReadyP50 || o.TimeToReadyP95 != rec.TimeToReadyP95 {
			t.Errorf("%s: time to ready p50 %s p95 %s; recorded %s %s", o.Name, o.TimeToReadyP50, o.TimeToReadyP95, rec.TimeToReadyP50, rec.TimeToReadyP95)
		}
	}
}
