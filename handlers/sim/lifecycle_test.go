package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

func TestHappyBootThenScaleDown(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "node-1.lan", "node-2.lan")
	start := h.Clock.Now()
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs("node-1.lan", projections.PhaseReady))
	c := claimOf(h, "node-1.lan")
	took := h.Clock.Now().Sub(start)
	if c.DeadlineAt != nil || c.Attempt != 1 || took > 3*time.Minute {
		t.Fatalf("ready claim: deadline %v attempt %d after %s", c.DeadlineAt, c.Attempt, took)
	}
	if n, ok := w.Cluster.Node("node-1.lan"); !ok || !n.Ready || n.Unschedulable || n.Labels["claimstream.dev/rack"] != "a" {
		t.Fatalf("node after ready: %+v %v", n, ok)
	}
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "node-1.lan"}}, RequestedBy: "cluster-autoscaler"})
	runUntil(t, w, 10*time.Minute, "completed", phaseIs("node-1.lan", projections.PhaseCompleted))
	// The NotReady node of the powered-off machine is deleted.
	runUntil(t, w, time.Minute, "node deleted", func(s *projections.State) bool { return !s.Slots["node-1.lan"].Node.Present })
	if w.Sim.On("node-1.lan") {
		t.Fatal("machine still on")
	}
	c = claimOf(h, "node-1.lan")
	t.Logf("timeline: %v", types(c))
	// Collected after its TTL.
	runUntil(t, w, 2*time.Hour, "collected", func(s *projections.State) bool { return len(s.Slots["node-1.lan"].Claims) == 0 })
	_ = context.Background()
}

// failedWith asserts the newest claim failed with reason and force, and
// that its machine got a force shutdown Job.
func failedWith(t *testing.T, h interface {
	Read(func(*projections.State))
}, c projections.Claim, reason string) {
	t.Helper()
	if c.Phase != projections.PhaseFailed || c.Reason != reason || !c.ForceShutdown {
		t.Fatalf("claim %s: %s/%s force=%t, want failed/%s with force shutdown; timeline %v", c.Name, c.Phase, c.Reason, c.ForceShutdown, reason, types(c))
	}
}

func TestBootThatTimesOut(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	w.Sim.SetKnobs("a", sim.Knobs{JobHangs: true})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	start := h.Clock.Now()
	runUntil(t, w, 15*time.Minute, "failed", phaseIs("a", projections.PhaseFailed))
	c := claimOf(h, "a")
	failedWith(t, h, c, projections.ReasonJobTimeout)
	if took := h.Clock.Now().Sub(start); took < 5*time.Minute || took > 5*time.Minute+time.Second {
		t.Fatalf("JobTimeout after %s, want 5m", took)
	}
	runUntil(t, w, time.Minute, "force shutdown fired", func(s *projections.State) bool { return s.Claims[c.Name].LastShutdownJob != "" })
}

func TestStartupJobFailure(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	w.Sim.SetKnobs("a", sim.Knobs{FailStartups: 1})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "failed", phaseIs("a", projections.PhaseFailed))
	failedWith(t, h, claimOf(h, "a"), projections.ReasonStartupJobFailed)
	runUntil(t, w, time.Minute, "force shutdown", func(s *projections.State) bool { return s.Slots["a"].LastShutdown != nil })
	// The next claim on the slot is attempt 2 and boots.
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	ok, _ := w.RunUntil(context.Background(), 15*time.Minute, phaseIs("a", projections.PhaseReady))
	if c := claimOf(h, "a"); !ok || c.Attempt != 2 {
		t.Logf("%+v %v", c, c.Timeline)
		t.Fatalf("second claim attempt %d, want 2", c.Attempt)
	}
}

func TestThreeFailedBootsRestTheSlot(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	w.Sim.SetKnobs("a", sim.Knobs{FailStartups: 10})
	for i := 1; i <= 3; i++ {
		h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
		runUntil(t, w, 15*time.Minute, "failed", phaseIs("a", projections.PhaseFailed))
		if c := claimOf(h, "a"); c.Attempt != i {
			t.Fatalf("claim %d has attempt %d", i, c.Attempt)
		}
	}
	if _, err := h.Exec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"}); decide.CodeOf(err) != decide.CodeFailedPrecondition {
		t.Fatalf("a 4th boot was allowed: %v", err)
	}
}

func TestReadinessGateTimeout(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	w.Sim.SetKnobs("a", sim.Knobs{TaintStays: true})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "failed", phaseIs("a", projections.PhaseFailed))
	failedWith(t, h, claimOf(h, "a"), projections.ReasonReadinessGateTimeout)
	runUntil(t, w, 5*time.Minute, "powered off", func(*projections.State) bool { return !w.Sim.On("a") })
}

func TestRegistrationTimeout(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	w.Sim.SetKnobs("a", sim.Knobs{NeverBoots: true})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	start := h.Clock.Now()
	runUntil(t, w, 15*time.Minute, "failed", phaseIs("a", projections.PhaseFailed))
	failedWith(t, h, claimOf(h, "a"), projections.ReasonReadinessGateTimeout)
	if took := h.Clock.Now().Sub(start); took < 110*time.Second || took > 111*time.Second {
		t.Fatalf("registration timeout after %s", took)
	}
}

func TestDeadlineFailsSlowBootButNeverReady(t *testing.T) {
	h, w := newWorld(t, sim.Timing{JobDuration: 4 * time.Minute})
	// A short budget: 1m job timeout... the deadline is the budget.
	declare(t, h, "g", events.GroupSpec{Lifecycle: events.Lifecycle{StartupJobTimeout: events.Duration(5 * time.Minute)}}, "a", "b")
	w.Sim.SetKnobs("a", sim.Knobs{BootExtra: 4 * time.Minute, NeverReady: false})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "ca"})
	runUntil(t, w, 20*time.Minute, "both settled", func(s *projections.State) bool {
		return phaseIs("a", projections.PhaseFailed)(s) && phaseIs("b", projections.PhaseReady)(s)
	})
	c := claimOf(h, "a")
	if c.Reason != projections.ReasonReadinessGateTimeout && c.Reason != projections.ReasonDeadlineExceeded {
		t.Fatalf("slow boot: %s", c.Reason)
	}
	// b is ready; time passes far beyond its old deadline: never failed.
	if err := w.RunFor(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if c := claimOf(h, "b"); c.Phase != projections.PhaseReady {
		t.Fatalf("ready claim ended %s/%s", c.Phase, c.Reason)
	}
}

func TestMachineGone(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	ctx := context.Background()
	// A reboot: off for a minute, back: the clock starts and stops.
	if err := w.Sim.Vanish(ctx, "a", false); err != nil {
		t.Fatal(err)
	}
	if err := w.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if c := claimOf(h, "a"); c.MachineOffSince == nil || c.Phase != projections.PhaseReady {
		t.Fatalf("machine off not recorded: %+v", c)
	}
	w.Sim.PowerOn("a")
	runUntil(t, w, 5*time.Minute, "back", func(s *projections.State) bool { return s.Claims[claimOf(h, "a").Name].MachineOffSince == nil })
	// Gone for good: failed MachineGone one boot window later.
	if err := w.Sim.Vanish(ctx, "a", true); err != nil {
		t.Fatal(err)
	}
	start := h.Clock.Now()
	runUntil(t, w, time.Hour, "failed", phaseIs("a", projections.PhaseFailed))
	failedWith(t, h, claimOf(h, "a"), projections.ReasonMachineGone)
	if took := h.Clock.Now().Sub(start); took < projections.DefaultBudget || took > projections.DefaultBudget+time.Second {
		t.Fatalf("MachineGone after %s, want %s", took, projections.DefaultBudget)
	}
}

func TestStuckShutdownIsBoundedPausedAndRetried(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	w.Sim.SetKnobs("a", sim.Knobs{ShutdownNoop: true})
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	name := claimOf(h, "a").Name
	runUntil(t, w, 30*time.Minute, "limit", func(s *projections.State) bool { return s.Claims[name].ShutdownPausedUntil != nil })
	c := claimOf(h, "a")
	if got := countType(c, events.TypeShutdownFired); got != 3 {
		t.Fatalf("%d shutdowns before the limit, want 3: %v", got, types(c))
	}
	if n, _ := w.Cluster.Node("a"); !n.Unschedulable {
		t.Fatal("node not cordoned")
	}
	paused := *c.ShutdownPausedUntil
	// Nothing fires during the pause.
	if err := w.RunFor(context.Background(), 29*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := countType(claimOf(h, "a"), events.TypeShutdownFired); got != 3 {
		t.Fatalf("fired during the pause: %d", got)
	}
	// The script is fixed; past the pause the shutdown fires again and lands.
	w.Sim.SetKnobs("a", sim.Knobs{})
	runUntil(t, w, 10*time.Minute, "completed", phaseIs("a", projections.PhaseCompleted))
	c = claimOf(h, "a")
	if got := countType(c, events.TypeShutdownFired); got != 4 || h.Clock.Now().Before(paused) {
		t.Fatalf("after the pause: %d shutdowns, now %s, paused until %s", got, h.Clock.Now(), paused)
	}
	if c.LastShutdownJob != decide.JobName(c.Name, "stop", 4) {
		t.Fatalf("4th shutdown Job %s", c.LastShutdownJob)
	}
}

func TestInputLawShutsDownAnUnclaimedMachine(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	w.Sim.PowerOn("a")
	runUntil(t, w, 5*time.Minute, "shutdown fired", func(s *projections.State) bool { return s.Slots["a"].LastShutdown != nil })
	var ls projections.Shutdown
	h.Read(func(s *projections.State) { ls = *s.Slots["a"].LastShutdown })
	if ls.Claim != "" || !ls.Force || ls.Cause == "" {
		t.Fatalf("input law shutdown: %+v", ls)
	}
	runUntil(t, w, 5*time.Minute, "node deleted", func(s *projections.State) bool { return !s.Slots["a"].Node.Present })
	if w.Sim.On("a") {
		t.Fatal("machine still on")
	}
}

func countType(c projections.Claim, typ events.Type) int {
	n := 0
	for _, s := range c.Timeline {
		if s.Type == typ {
			n++
		}
	}
	return n
}
