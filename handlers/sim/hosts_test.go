package sim_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// A burst instance registers under the name and providerID its startup Job
// reported, not the slot's. It is matched, gated, tracked and given back
// under that name: no readiness timeout, no refusal, and
// cluster-autoscaler's DeleteNodes by that Node finds the slot.
func TestHostUnderAnotherNameIsMatchedTrackedAndGivenBack(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	tmpl := &events.NodeTemplate{Labels: map[string]string{"node.kubernetes.io/instance-type": "burst-8c"}}
	declare(t, h, "g", events.GroupSpec{Template: tmpl, ReadinessTaints: []events.Taint{{Key: "node.cilium.io/agent-not-ready", Effect: "NoSchedule"}}}, "burst-1")
	const node, pid = "ip-10-0-3-7", "aws:///eu-west-1a/i-0abc"
	w.Sim.SetKnobs("burst-1", sim.Knobs{InstanceID: "i-0abc", Node: node, ProviderID: pid})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs("burst-1", projections.PhaseReady))

	c := claimOf(h, "burst-1")
	if c.Expected == nil || c.Expected.Node != node || c.Expected.ProviderID != pid {
		t.Fatalf("expected %+v", c.Expected)
	}
	if c.Joined == nil || c.Joined.Node != node || c.Joined.MatchedBy != "providerID" || c.Node != node {
		t.Fatalf("joined %+v, ready on %q", c.Joined, c.Node)
	}
	h.Read(func(s *projections.State) {
		sl := s.Slots["burst-1"]
		if sl.Node.Name != node || !sl.Node.Ready || sl.LastJoinRefused != nil {
			t.Fatalf("observed %+v, refused %+v", sl.Node, sl.LastJoinRefused)
		}
		if _, stray := s.Slots[node]; stray {
			t.Fatalf("the host became a slot of its own")
		}
		if got, ok := s.SlotForNode(node, pid); !ok || got.Name != "burst-1" {
			t.Fatalf("SlotForNode = %v %v", got, ok)
		}
	})
	n, ok := w.Cluster.Node(node)
	if !ok || n.Unschedulable || n.HasTaint(handlers.RefusedTaint) || n.Labels["node.kubernetes.io/instance-type"] != "burst-8c" || n.Labels["claimstream.dev/rack"] != "a" {
		t.Fatalf("host %+v", n)
	}
	if _, ok := w.Cluster.Node("burst-1"); ok {
		t.Fatal("a Node under the slot's name appeared")
	}

	// cluster-autoscaler gives it back by the Node it knows.
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: node, ProviderID: pid}}, RequestedBy: "ca"})
	runUntil(t, w, 10*time.Minute, "completed", phaseIs("burst-1", projections.PhaseCompleted))
	if w.Sim.On("burst-1") {
		t.Fatal("machine still on")
	}
	if c := claimOf(h, "burst-1"); c.Reason != projections.ReasonScaledDown {
		t.Fatalf("%s/%s %q", c.Phase, c.Reason, c.Message)
	}
}

// A startup Job whose report cannot be read fails its claim with the
// report's fault in words and forces the machine off; the slot's defaults
// are never expected in its place.
func TestUnreadableJobReportFailsTheClaim(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	w.Sim.SetKnobs("a", sim.Knobs{Report: `{"instanceID": 42}`})
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 5*time.Minute, "failed", phaseIs("a", projections.PhaseFailed))
	c := claimOf(h, "a")
	if c.Reason != projections.ReasonStartupJobFailed || !c.ForceShutdown || !strings.Contains(c.Message, "cannot be read") || c.Expected != nil || c.ReadyAt != nil {
		t.Fatalf("%s/%s %q force=%t expected=%+v", c.Phase, c.Reason, c.Message, c.ForceShutdown, c.Expected)
	}
}

// A slot named with ~200 characters (a valid DNS subdomain) boots and
// shuts down, and every label its Jobs and Nodes carry is a valid label
// value (client-go's fake clientset does not check them; the e2e suite
// runs the same against a real apiserver).
func TestLongSlotNameBootsAndShutsDown(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	slot := strings.Repeat("rack-a.", 27) + "machine-with-a-long-name-1"
	group := strings.Repeat("g", 70)
	declare(t, h, group, events.GroupSpec{Template: &events.NodeTemplate{}}, slot)
	h.MustExec(decide.IncreaseSize{Group: group, Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 15*time.Minute, "ready", phaseIs(slot, projections.PhaseReady))
	ctx := context.Background()
	nodes, err := w.Fake.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes %v, %v", nodes, err)
	}
	checkMeta(t, "node", "", nodes.Items[0].Labels)
	h.MustExec(decide.DeleteNodes{Group: group, Nodes: []decide.NodeRef{{Name: slot}}, RequestedBy: "ca"})
	runUntil(t, w, 10*time.Minute, "completed", phaseIs(slot, projections.PhaseCompleted))
	if w.Sim.On(slot) {
		t.Fatal("machine still on")
	}
	jobs, err := w.Fake.BatchV1().Jobs("claimstream").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) < 2 {
		t.Fatalf("%d Jobs, want a startup and a shutdown", len(jobs.Items))
	}
	for _, j := range jobs.Items {
		checkMeta(t, "job "+j.Name, j.Name, j.Labels)
		checkMeta(t, "pod template of "+j.Name, j.Name, j.Spec.Template.Labels)
		if got := handlers.SlotOfJob(j.Labels, j.Annotations); got != slot {
			t.Fatalf("job %s names slot %q", j.Name, got)
		}
	}
}

func checkMeta(t *testing.T, what, name string, labels map[string]string) {
	t.Helper()
	if name != "" {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || len(name) > 63 {
			t.Fatalf("%s: name %q: %v", what, name, errs)
		}
	}
	for k, v := range labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("%s: label %s=%q: %v", what, k, v, errs)
		}
	}
}

// A startup Job that succeeded without naming an instance has its pods
// listed a few times per boot, not at every pass: the passes of a slot
// still booting (here for 90 seconds until its Node registers) stop
// reading its output once it read empty twice, 10 seconds apart (13 lists
// per boot before). A later boot's Job is read again.
func TestASilentStartupJobIsReadAFewTimesPerBoot(t *testing.T) {
	h, w := newWorld(t, sim.Timing{BootDelay: 90 * time.Second})
	declare(t, h, "g", events.GroupSpec{}, "a")
	var mu sync.Mutex
	lists := map[string]int{}
	w.Fake.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if job, ok := a.(k8stesting.ListAction).GetListRestrictions().Labels.RequiresExactMatch("batch.kubernetes.io/job-name"); ok {
			mu.Lock()
			lists[job]++
			mu.Unlock()
		}
		return false, nil, nil
	})
	reads := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(lists)
	}
	boot := func() string {
		t.Helper()
		h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
		runUntil(t, w, 15*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
		return claimOf(h, "a").StartupJob
	}
	first := boot()
	const most = 3
	if got := reads(); got[first] < 2 || got[first] > most || len(got) != 1 {
		t.Fatalf("pods of the startup Job listed %v, want 2 to %d times for %s", got, most, first)
	}
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	runUntil(t, w, 10*time.Minute, "completed", phaseIs("a", projections.PhaseCompleted))
	second := boot()
	if got := reads(); second == first || got[second] < 2 || got[second] > most || len(got) != 2 {
		t.Fatalf("pods of the startup Jobs listed %v, want 2 to %d times for %s", got, most, second)
	}
}
