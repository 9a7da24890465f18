package sim_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// decisions lists the group's ScaleDecided events from the log.
func decisions(t *testing.T, h *handlerstest.Harness, group string) []events.ScaleDecided {
	t.Helper()
	var out []events.ScaleDecided
	err := h.Store.ReadAggregate(context.Background(), events.GroupAggregate(group), func(e events.Event) error {
		if d, ok := e.Data.(events.ScaleDecided); ok {
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func actions(ds []events.ScaleDecided) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Action)
	}
	return out
}

func readyCount(group string) func(*projections.State) bool {
	return func(s *projections.State) bool {
		n := 0
		for _, c := range s.LiveClaims(group) {
			if c.Phase == projections.PhaseReady && c.WantsMachine() {
				n++
			}
		}
		return n == 3
	}
}

func builtinSpec(ppn, maxNodes int) events.GroupSpec {
	return events.GroupSpec{Scaler: events.ScalerBuiltin, Builtin: &events.BuiltinScaler{PodsPerNode: ppn, MaxNodes: maxNodes, Hold: events.Duration(2 * time.Minute)}}
}

// TestBuiltinThreeJobsToThreeNodesAndBackToZero: the built-in scaler's live case in
// the simulator: three concurrent job pods at one pod a node and MaxNodes 3
// make three nodes, each runs one, and past the hold every node is released.
func TestBuiltinThreeJobsToThreeNodesAndBackToZero(t *testing.T) {
	h, w := newWorld(t, sim.Timing{PodsPerNode: 1})
	declare(t, h, "ci", builtinSpec(1, 3), "ci-1", "ci-2", "ci-3", "ci-4")
	ctx := context.Background()
	for _, name := range []string{"job-a", "job-b", "job-c"} {
		if err := w.Sim.RunPod(ctx, sim.PodSpec{Namespace: "ci", Name: name, RunsFor: 5 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	runUntil(t, w, 15*time.Minute, "three ready nodes", readyCount("ci"))
	runUntil(t, w, 5*time.Minute, "each node runs one job", func(*projections.State) bool {
		busy := 0
		for _, n := range []string{"ci-1", "ci-2", "ci-3", "ci-4"} {
			if p, _ := w.Sim.PodsOn(ctx, n); len(p) == 1 {
				busy++
			}
		}
		return busy == 3
	})
	ds := decisions(t, h, "ci")
	if len(ds) != 1 || ds[0].Action != "Provision" || ds[0].Demand != 3 || ds[0].Target != 3 || ds[0].Nodes != 0 {
		t.Fatalf("decisions %+v", ds)
	}
	var byBuiltin int
	h.Read(func(s *projections.State) {
		for _, c := range s.LiveClaims("ci") {
			if c.RequestedBy == handlers.BuiltinRequester && c.Request.Call == events.CallDecide {
				byBuiltin++
			}
		}
	})
	if byBuiltin != 3 {
		t.Fatalf("%d claims by the built-in scaler with call Decide, want 3", byBuiltin)
	}
	// The jobs end; the hold; every node released and off.
	runUntil(t, w, 30*time.Minute, "back to zero", func(s *projections.State) bool {
		for _, n := range []string{"ci-1", "ci-2", "ci-3", "ci-4"} {
			if s.Slots[n].Node.Present || s.LiveOfSlot(n) != nil {
				return false
			}
		}
		return true
	})
	ds = decisions(t, h, "ci")
	if got := actions(ds); !slices.Equal(got, []string{"Provision", "Hold", "Teardown"}) {
		t.Fatalf("actions %v", got)
	}
	hold, td := ds[1], ds[2]
	if hold.Demand != 0 || hold.Nodes != 3 || len(td.Slots) != 3 {
		t.Fatalf("hold %+v teardown %+v", hold, td)
	}
	var g projections.Group
	h.Read(func(s *projections.State) { g = *s.Groups["ci"] })
	if g.LastDecision == nil || g.LastDecision.Action != "Teardown" || len(g.LastDecision.Slots) != 3 {
		t.Fatalf("last decision %+v", g.LastDecision)
	}
	for _, n := range []string{"ci-1", "ci-2", "ci-3"} {
		if w.Sim.On(n) {
			t.Fatalf("%s still on", n)
		}
	}
}

// TestBuiltinHoldSurvivesRestart: the hold's clock is the recorded Hold
// decision, so a restart in the middle of it neither restarts nor skips it.
func TestBuiltinHoldSurvivesRestart(t *testing.T) {
	h, w := newWorld(t, sim.Timing{PodsPerNode: 1})
	declare(t, h, "ci", builtinSpec(1, 1), "ci-1")
	ctx := context.Background()
	if err := w.Sim.RunPod(ctx, sim.PodSpec{Namespace: "ci", Name: "job", RunsFor: time.Minute}); err != nil {
		t.Fatal(err)
	}
	runUntil(t, w, 20*time.Minute, "hold", func(s *projections.State) bool {
		return s.Groups["ci"].LastDecision != nil && s.Groups["ci"].LastDecision.Action == "Hold"
	})
	holdAt := h.Clock.Now()
	if err := w.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	h.Restart()
	if err := w.Restart(ctx, h.Views, h.Service); err != nil {
		t.Fatal(err)
	}
	runUntil(t, w, 5*time.Minute, "teardown", func(s *projections.State) bool {
		return s.Groups["ci"].LastDecision.Action == "Teardown"
	})
	if took := h.Clock.Now().Sub(holdAt); took < 2*time.Minute || took > 2*time.Minute+time.Second {
		t.Fatalf("teardown %s after the hold began, want 2m", took)
	}
}

// TestBuiltinScaleInNeverPicksTenantWork: with intent and more nodes than
// the target, one idle node is released per hold, never one running
// tenant work, never below the target.
func TestBuiltinScaleInNeverPicksTenantWork(t *testing.T) {
	h, w := newWorld(t, sim.Timing{PodsPerNode: 1})
	declare(t, h, "ci", builtinSpec(1, 3), "ci-1", "ci-2", "ci-3")
	ctx := context.Background()
	if err := w.Sim.RunPod(ctx, sim.PodSpec{Namespace: "ci", Name: "long"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"short-1", "short-2"} {
		if err := w.Sim.RunPod(ctx, sim.PodSpec{Namespace: "ci", Name: name, RunsFor: 3 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	runUntil(t, w, 15*time.Minute, "three ready nodes", readyCount("ci"))
	var longOn string
	runUntil(t, w, 5*time.Minute, "placed", func(*projections.State) bool {
		for _, n := range []string{"ci-1", "ci-2", "ci-3"} {
			if p, _ := w.Sim.PodsOn(ctx, n); slices.Contains(p, "ci/long") {
				longOn = n
			}
		}
		return longOn != ""
	})
	runUntil(t, w, 30*time.Minute, "one node left", func(s *projections.State) bool {
		return s.TargetSize("ci") == 1 && len(s.LiveClaims("ci")) == 1
	})
	if p, _ := w.Sim.PodsOn(ctx, longOn); !slices.Contains(p, "ci/long") {
		t.Fatalf("the tenant pod left its node %s: %v", longOn, p)
	}
	ds := decisions(t, h, "ci")
	var released []string
	for _, d := range ds {
		if d.Action == "Release" {
			released = append(released, d.Slots...)
			if slices.Contains(d.Slots, longOn) {
				t.Fatalf("released %s, which runs tenant work: %+v", longOn, d)
			}
			if d.Nodes-len(d.Slots) < d.Target {
				t.Fatalf("released below the target: %+v", d)
			}
		}
	}
	if len(released) != 2 {
		t.Fatalf("released %v (actions %v), want the two idle nodes one per hold", released, actions(ds))
	}
	var c projections.Claim
	h.Read(func(s *projections.State) { c = *s.LiveClaims("ci")[0] })
	if c.Slot != longOn {
		t.Fatalf("kept %s, the tenant work is on %s", c.Slot, longOn)
	}
}

// TestHostJoiningAfterItsDeadlineIsRefusedAndShutDown: a machine that
// registers after its claim failed DeadlineExceeded is refused (cordoned,
// tainted, HostJoinRefused naming the deadline) and shut down.
func TestHostJoiningAfterItsDeadlineIsRefusedAndShutDown(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	w.Sim.SetKnobs("a", sim.Knobs{BootExtra: 15 * time.Minute, ShutdownNoop: true})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 20*time.Minute, "failed", phaseIs("a", projections.PhaseFailed))
	c := claimOf(h, "a")
	if c.DeadlineAt == nil {
		t.Fatalf("failed claim without its deadline: %+v", c)
	}
	runUntil(t, w, 20*time.Minute, "refused", func(s *projections.State) bool { return s.Slots["a"].LastJoinRefused != nil })
	var sl projections.Slot
	h.Read(func(s *projections.State) { sl = *s.Slots["a"] })
	if !strings.Contains(sl.LastJoinRefused.Reason, "deadline") || sl.LastJoinRefused.By != "a" {
		t.Fatalf("refusal %+v", sl.LastJoinRefused)
	}
	n, _ := w.Cluster.Node("a")
	if !n.Unschedulable || !n.HasTaint(handlers.RefusedTaint) {
		t.Fatalf("refused node not cordoned and tainted: %+v", n)
	}
	if !n.CreatedAt.After(*c.DeadlineAt) {
		t.Fatalf("node joined at %s, before the deadline %s", n.CreatedAt, c.DeadlineAt)
	}
	refusedAt := sl.LastJoinRefused.At
	runUntil(t, w, 5*time.Minute, "shut down", func(s *projections.State) bool {
		ls := s.Slots["a"].LastShutdown
		return ls != nil && ls.Claim == "" && !ls.At.Before(refusedAt)
	})
}

// TestDecommissionDrainsShutsDownAndRefusesRejoin: decommission drains the
// machine through the eviction API (a PodDisruptionBudget holds it until
// the drain timeout; force deletes the pod), shuts it down, removes its
// Node; the slot reads decommissioned; a rejoin is refused and shut down;
// recommission makes it claimable again.
func TestDecommissionDrainsShutsDownAndRefusesRejoin(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	spec := events.GroupSpec{DrainTimeout: events.Duration(5 * time.Minute), OnDrainTimeout: events.DrainForce}
	declare(t, h, "g", spec, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	ctx := context.Background()
	if err := w.Sim.RunPod(ctx, sim.PodSpec{Namespace: "web", Name: "web-0", Node: "a", Labels: map[string]string{"app": "web"}}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := w.Fake.PolicyV1().PodDisruptionBudgets("web").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.MustExec(decide.Decommission{Slot: "a", By: "alice", Reason: "disk"})
	start := h.Clock.Now()
	runUntil(t, w, time.Minute, "drain started", func(s *projections.State) bool {
		c := s.LiveOfSlot("a")
		return c != nil && c.Drain != nil
	})
	if err := w.RunFor(ctx, 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	if p, _ := w.Sim.PodsOn(ctx, "a"); len(p) != 1 || !w.Sim.On("a") {
		t.Fatalf("the budget did not hold the drain: pods %v, on %t", p, w.Sim.On("a"))
	}
	if n, _ := w.Cluster.Node("a"); !n.Unschedulable {
		t.Fatal("draining node not cordoned")
	}
	runUntil(t, w, 10*time.Minute, "decommissioned", func(s *projections.State) bool {
		return s.SlotPhase("a") == projections.SlotDecommissioned
	})
	c := claimOf(h, "a")
	if c.Drain == nil || c.Drain.TimedOutAt == nil || c.Drain.Policy != events.DrainForce || c.Drain.TimedOutAt.Sub(start) < 5*time.Minute {
		t.Fatalf("drain %+v", c.Drain)
	}
	if c.Phase != projections.PhaseCompleted {
		t.Fatalf("claim %s/%s", c.Phase, c.Reason)
	}
	if _, ok := w.Cluster.Node("a"); ok || w.Sim.On("a") {
		t.Fatal("node not removed")
	}
	// A rejoin is refused and shut down.
	w.Sim.PowerOn("a")
	runUntil(t, w, 5*time.Minute, "rejoin refused", func(s *projections.State) bool { return s.Slots["a"].LastJoinRefused != nil })
	var sl projections.Slot
	h.Read(func(s *projections.State) { sl = *s.Slots["a"] })
	if !strings.Contains(sl.LastJoinRefused.Reason, "decommissioned") {
		t.Fatalf("refusal %+v", sl.LastJoinRefused)
	}
	runUntil(t, w, 5*time.Minute, "rejoined machine off", func(*projections.State) bool { return !w.Sim.On("a") })
	if _, err := h.Exec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"}); err == nil {
		t.Fatal("claimed a decommissioned slot")
	}
	h.MustExec(decide.Recommission{Slot: "a", By: "alice"})
	runUntil(t, w, 5*time.Minute, "node cleaned up", func(s *projections.State) bool { return !s.Slots["a"].Node.Present })
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready again", phaseIs("a", projections.PhaseReady))
	if n, _ := w.Cluster.Node("a"); n.HasTaint(handlers.RefusedTaint) {
		t.Fatal("refused taint kept after recommission")
	}
}

// TestDrainWaitPolicy: past the timeout, wait stops evicting and lets the
// remaining pod end by itself; the shutdown follows it.
func TestDrainWaitPolicy(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{DrainTimeout: events.Duration(2 * time.Minute)}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	ctx := context.Background()
	if err := w.Sim.RunPod(ctx, sim.PodSpec{Namespace: "ci", Name: "build", Node: "a", RunsFor: 6 * time.Minute, Labels: map[string]string{"app": "build"}}); err != nil {
		t.Fatal(err)
	}
	zero := intstr.FromInt32(0)
	if _, err := w.Fake.PolicyV1().PodDisruptionBudgets("ci").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "build", Namespace: "ci"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "build"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	runUntil(t, w, 3*time.Minute, "timed out", func(s *projections.State) bool {
		c := s.LiveOfSlot("a")
		return c != nil && c.Drain != nil && c.Drain.TimedOutAt != nil
	})
	if c := claimOf(h, "a"); c.Drain.Policy != events.DrainWait || len(c.Drain.Remaining) != 1 || c.LastShutdownJob != "" {
		t.Fatalf("drain %+v shutdown %q", c.Drain, c.LastShutdownJob)
	}
	runUntil(t, w, 10*time.Minute, "completed", phaseIs("a", projections.PhaseCompleted))
	if c := claimOf(h, "a"); c.LastShutdownAttemptAt == nil || c.LastShutdownAttemptAt.Sub(c.Drain.StartedAt) < 6*time.Minute-time.Second {
		t.Fatalf("shut down before the pod ended: %+v", c.LastShutdownAttemptAt)
	}
}

// TestExpectedHostFromTheProvisioningJob: a startup Job that reports the
// instance it bought records the expected host; the Node that registers is
// matched to it by providerID (HostJoined).
func TestExpectedHostFromTheProvisioningJob(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{Template: &events.NodeTemplate{Labels: map[string]string{"node.kubernetes.io/instance-type": "burst-8c"}}}, "a")
	w.Sim.SetKnobs("a", sim.Knobs{InstanceID: "i-0abc"})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	c := claimOf(h, "a")
	if c.Expected == nil || c.Expected.InstanceID != "i-0abc" || c.Expected.ProviderID != "homelab://a" || c.Expected.DeadlineAt.IsZero() {
		t.Fatalf("expected %+v", c.Expected)
	}
	if c.Joined == nil || c.Joined.MatchedBy != "providerID" || c.Joined.Node != "a" {
		t.Fatalf("joined %+v", c.Joined)
	}
	if n, _ := w.Cluster.Node("a"); n.Labels["node.kubernetes.io/instance-type"] != "burst-8c" || n.Labels[handlers.LabelGroup] != "g" {
		t.Fatalf("template labels not given: %v", n.Labels)
	}
}

// TestProviderReclaimIsHostLoss: a machine its provider reclaims fails its
// claim HostLost at once, the reason recorded, with a force shutdown.
func TestProviderReclaimIsHostLoss(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	if err := w.Sim.Reclaim(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	runUntil(t, w, time.Minute, "failed", phaseIs("a", projections.PhaseFailed))
	c := claimOf(h, "a")
	if c.Reason != projections.ReasonHostLost || !c.ForceShutdown || !strings.Contains(c.Message, "node.cloudprovider.kubernetes.io/shutdown") {
		t.Fatalf("%s/%s %q force=%t", c.Phase, c.Reason, c.Message, c.ForceShutdown)
	}
}

// TestStrayHostIsRefused: a Node that says it belongs to a managed group
// and is no slot of it is refused, reported once on the group's stray-host
// record; strays under many names never become slots of their own.
func TestStrayHostIsRefused(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	ctx := context.Background()
	strays := []string{"intruder", "intruder-2", "intruder-3"}
	for i, name := range strays {
		if err := w.Fake.RegisterNode(ctx, name, "aws:///i-99"+strings.Repeat("9", i), nil, h.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		n, err := w.Fake.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[handlers.LabelGroup] = "g"
		if _, err := w.Fake.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	record := decide.StrayHostsSlot("g")
	runUntil(t, w, time.Minute, "refused", func(s *projections.State) bool {
		sl := s.Slots[record]
		return sl != nil && sl.LastJoinRefused != nil
	})
	// Reported once each.
	if err := w.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, name := range strays {
		if v, _ := w.Cluster.Node(name); !v.Unschedulable || !v.HasTaint(handlers.RefusedTaint) {
			t.Fatalf("stray %s not cordoned and tainted: %+v", name, v)
		}
	}
	refusals := map[string]int{}
	_ = h.Store.ReadAggregate(ctx, events.SlotAggregate(record), func(e events.Event) error {
		if d, ok := e.Data.(events.HostJoinRefused); ok {
			refusals[d.Node]++
		}
		return nil
	})
	for _, name := range strays {
		if refusals[name] != 1 {
			t.Fatalf("refusals %v", refusals)
		}
	}
	h.Read(func(s *projections.State) {
		for _, name := range strays {
			if _, ok := s.Slots[name]; ok {
				t.Fatalf("stray %s became a slot in the views", name)
			}
		}
		if len(s.Slots) != 2 {
			t.Fatalf("%d slots in the views, want a and the stray-host record", len(s.Slots))
		}
	})
}
