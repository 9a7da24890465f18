package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// The example story on the example pool's groups and slots, on a fake
// clock: claims move through their phases as the README says.
func TestExampleScenario(t *testing.T) {
	sc, err := sim.LoadScenario("../../deploy/examples/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h, w := newWorld(t, sc.TimingOf())
	declare(t, h, "homelab", events.GroupSpec{MaxSize: 3, MaxNodeProvisionTime: events.Duration(15 * time.Minute)}, "node-1.lan", "node-2.lan", "node-3.lan")
	declare(t, h, "burst", events.GroupSpec{ReadinessTaints: []events.Taint{}, ClaimTTL: events.Duration(30 * time.Minute)}, "burst-1", "burst-2")
	if err := w.Play(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	var failed, ready, completed int
	h.Read(func(s *projections.State) {
		for _, c := range s.Claims {
			switch c.Phase {
			case projections.PhaseFailed:
				failed++
			case projections.PhaseReady:
				ready++
			case projections.PhaseCompleted:
				completed++
			}
		}
		if sl := s.Slots["node-1.lan"]; sl.LastShutdown == nil || sl.LastShutdown.Claim != "" {
			t.Errorf("the hand-started node-1.lan was not shut down by the input law: %+v", sl.LastShutdown)
		}
		for _, name := range []string{"node-1.lan", "node-2.lan", "node-3.lan", "burst-1", "burst-2"} {
			if d := s.Slots[name].LastClaim; d != nil {
				t.Logf("%-11s %-9s attempt %d %s", name, d.Phase, d.Attempt, d.Reason)
			}
		}
	})
	if failed != 1 || ready != 3 || completed != 2 {
		t.Fatalf("failed %d ready %d completed %d; want 1, 3, 2", failed, ready, completed)
	}
}
