package scale

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func i32(v int32) *int32 { return &v }
func tr() *bool          { v := true; return &v }

func pod(name string, phase corev1.PodPhase, owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci", OwnerReferences: owners}, Status: corev1.PodStatus{Phase: phase}}
}

func on(p *corev1.Pod, node string) *corev1.Pod { p.Spec.NodeName = node; return p }

func ownedBy(kind, name string) metav1.OwnerReference {
	return metav1.OwnerReference{Kind: kind, Name: name, Controller: tr()}
}

func pods(n int, phase corev1.PodPhase) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("p%d", i), phase)
	}
	return out
}

func job(name string, par, comp *int32, succeeded int32) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci"}, Spec: batchv1.JobSpec{Parallelism: par, Completions: comp}, Status: batchv1.JobStatus{Succeeded: succeeded}}
}

func deploy(name string, r *int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci"}, Spec: appsv1.DeploymentSpec{Replicas: r}}
}

func rs(name, deployment string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci", OwnerReferences: []metav1.OwnerReference{ownedBy("Deployment", deployment)}}}
}

var now = time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)

// fixtures: every Intent case and every counting case of the built-in scaler.
var fixtures = []struct {
	name   string
	o      Observation
	demand int
}{
	{"empty cluster", Observation{}, 0},
	{"one pending pod", Observation{Pods: pods(1, corev1.PodPending)}, 1},
	{"empty phase reads pending", Observation{Pods: pods(1, "")}, 1},
	{"running pods", Observation{Pods: pods(3, corev1.PodRunning)}, 3},
	{"unknown pod of a departed node", Observation{Pods: pods(1, corev1.PodUnknown)}, 1},
	{"succeeded and failed pods are not work", Observation{Pods: append(pods(2, corev1.PodSucceeded), pod("f", corev1.PodFailed))}, 0},
	{"kube-system addons are not work", Observation{Pods: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}}}, 0},
	{"claimstream lifecycle pods are not work", Observation{Pods: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a-start-1", Namespace: "claimstream", Labels: map[string]string{LifecycleLabel: "startup"}}}}}, 0},
	{"claimstream lifecycle Jobs are not work", Observation{Jobs: []*batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Name: "a-start-1", Namespace: "claimstream", Labels: map[string]string{LifecycleLabel: "startup"}}}}}, 0},
	{"mirror pods are not work", Observation{Pods: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ci", Annotations: map[string]string{MirrorAnnotation: "x"}}}}}, 0},
	{"unfinished Job, defaults", Observation{Jobs: []*batchv1.Job{job("j", nil, nil, 0)}}, 1},
	{"Job parallelism 4 of 10, 8 done", Observation{Jobs: []*batchv1.Job{job("j", i32(4), i32(10), 8)}}, 2},
	{"Job parallelism 0 is still unfinished work", Observation{Jobs: []*batchv1.Job{job("j", i32(0), nil, 0)}}, 1},
	{"completed Job", Observation{Jobs: []*batchv1.Job{func() *batchv1.Job {
		j := job("j", nil, nil, 1)
		t := metav1.NewTime(now)
		j.Status.CompletionTime = &t
		return j
	}()}}, 0},
	{"failed Job", Observation{Jobs: []*batchv1.Job{func() *batchv1.Job {
		j := job("j", nil, nil, 0)
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
		return j
	}()}}, 0},
	{"suspended Job", Observation{Jobs: []*batchv1.Job{func() *batchv1.Job { j := job("j", nil, nil, 0); j.Spec.Suspend = tr(); return j }()}}, 0},
	{"Deployment without replicas counts 1", Observation{Deployments: []*appsv1.Deployment{deploy("d", nil)}}, 1},
	{"Deployment replicas 3", Observation{Deployments: []*appsv1.Deployment{deploy("d", i32(3))}}, 3},
	{"Deployment replicas 0", Observation{Deployments: []*appsv1.Deployment{deploy("d", i32(0))}}, 0},
	{"StatefulSet without replicas counts 1", Observation{StatefulSets: []*appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ci"}}}}, 1},
	{"DaemonSet desired 2", Observation{DaemonSets: []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "ci"}, Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2}}}}, 2},
	{"DaemonSet wanting nothing", Observation{DaemonSets: []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "ci"}}}}, 0},
	// Better than the seed: no double count through ownerReferences.
	{"Deployment's pods are not counted again", Observation{
		Deployments: []*appsv1.Deployment{deploy("web", i32(2))},
		ReplicaSets: []*appsv1.ReplicaSet{rs("web-5d8", "web")},
		Pods:        []*corev1.Pod{pod("web-5d8-a", corev1.PodRunning, ownedBy("ReplicaSet", "web-5d8")), pod("web-5d8-b", corev1.PodPending, ownedBy("ReplicaSet", "web-5d8"))},
	}, 2},
	{"StatefulSet's pods are not counted again", Observation{
		StatefulSets: []*appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ci"}, Spec: appsv1.StatefulSetSpec{Replicas: i32(2)}}},
		Pods:         []*corev1.Pod{pod("db-0", corev1.PodRunning, ownedBy("StatefulSet", "db")), pod("db-1", corev1.PodRunning, ownedBy("StatefulSet", "db"))},
	}, 2},
	{"Job's pods are not counted again", Observation{
		Jobs: []*batchv1.Job{job("build", i32(3), i32(3), 0)},
		Pods: []*corev1.Pod{pod("build-a", corev1.PodRunning, ownedBy("Job", "build")), pod("build-b", corev1.PodRunning, ownedBy("Job", "build"))},
	}, 3},
	{"a scaled-to-zero Deployment's terminating pod counts itself", Observation{
		Deployments: []*appsv1.Deployment{deploy("web", i32(0))},
		ReplicaSets: []*appsv1.ReplicaSet{rs("web-5d8", "web")},
		Pods:        []*corev1.Pod{pod("web-5d8-a", corev1.PodRunning, ownedBy("ReplicaSet", "web-5d8"))},
	}, 1},
	{"an orphan ReplicaSet's pods count themselves", Observation{
		ReplicaSets: []*appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ci"}}},
		Pods:        []*corev1.Pod{pod("bare-a", corev1.PodRunning, ownedBy("ReplicaSet", "bare"))},
	}, 1},
	{"same name in another namespace is another owner", Observation{
		Deployments: []*appsv1.Deployment{deploy("web", i32(1))},
		ReplicaSets: []*appsv1.ReplicaSet{rs("web-5d8", "web")},
		Pods: []*corev1.Pod{func() *corev1.Pod {
			p := pod("web-5d8-a", corev1.PodRunning, ownedBy("ReplicaSet", "web-5d8"))
			p.Namespace = "other"
			return p
		}()},
	}, 2},
}

func TestDemand(t *testing.T) {
	for _, f := range fixtures {
		if got := Demand(f.o); got != f.demand {
			t.Errorf("%s: Demand = %d, want %d", f.name, got, f.demand)
		}
	}
}

// TestDemandAgreesWithIntent: one definition of "is there work":
// Demand(o) > 0 == Intent(o) on every fixture.
func TestDemandAgreesWithIntent(t *testing.T) {
	for _, f := range fixtures {
		if d, i := Demand(f.o), Intent(f.o); (d > 0) != i || d < 0 {
			t.Errorf("%s: Demand %d but Intent %t", f.name, d, i)
		}
	}
}

// TestTarget is the built-in scaler's target table.
func TestTarget(t *testing.T) {
	cases := []struct {
		name string
		o    Observation
		opts Options
		want int
	}{
		{"0 at zero demand", Observation{}, Options{PodsPerNode: 8, MaxNodes: 4}, 0},
		{"1 at one pod with 8 per node", Observation{Pods: pods(1, corev1.PodPending)}, Options{PodsPerNode: 8, MaxNodes: 4}, 1},
		{"3 at 17 pods", Observation{Pods: pods(17, corev1.PodPending)}, Options{PodsPerNode: 8, MaxNodes: 4}, 3},
		{"MaxNodes at 100 pods with MaxNodes 4", Observation{Pods: pods(100, corev1.PodPending)}, Options{PodsPerNode: 8, MaxNodes: 4}, 4},
		{"exactly 16 pods", Observation{Pods: pods(16, corev1.PodPending)}, Options{PodsPerNode: 8, MaxNodes: 4}, 2},
		{"defaults: MaxNodes 1", Observation{Pods: pods(100, corev1.PodPending)}, Options{}, DefaultMaxNodes},
		{"defaults: 8 a node", Observation{Pods: pods(9, corev1.PodPending)}, Options{MaxNodes: 10}, 2},
	}
	for _, c := range cases {
		if got := Target(c.o, c.opts); got != c.want {
			t.Errorf("%s: Target = %d, want %d", c.name, got, c.want)
		}
	}
	if (Options{}).HoldOrDefault() != 2*time.Minute || (Options{}).PodsPerNodeOrDefault() != 8 || (Options{}).MaxNodesOrDefault() != 1 {
		t.Error("defaults")
	}
}

func group(nodes ...Node) Group {
	return Group{Name: "g", Options: Options{PodsPerNode: 1, MaxNodes: 4, Hold: 2 * time.Minute}, MaxSize: 4, Free: 4 - len(nodes), Nodes: nodes}
}

func ready(slot string, since time.Duration) Node {
	return Node{Slot: slot, Ready: true, Since: now.Add(-since)}
}

func TestDecideProvisionHoldTeardown(t *testing.T) {
	o := Observation{Pods: pods(3, corev1.PodPending)}
	d := Decide(o, group(), now)
	if d.Action != ActionProvision || d.Create != 3 || d.Target != 3 || d.Demand != 3 {
		t.Fatalf("provision: %+v", d)
	}
	// Booting: counted, nothing more.
	g := group(Node{Slot: "a"}, Node{Slot: "b"}, Node{Slot: "c"})
	if d := Decide(o, g, now); d.Action != ActionNone || d.Record() {
		t.Fatalf("at target: %+v", d)
	}
	// Fewer free slots than missing nodes: what there is.
	g2 := group(Node{Slot: "a"})
	g2.Free = 1
	if d := Decide(o, g2, now); d.Action != ActionProvision || d.Create != 1 || !strings.Contains(d.Reason, "creating 1 claim (") {
		t.Fatalf("capped by free slots: %+v", d)
	}
	// A target above the slots in service is capped.
	g3 := group()
	g3.MaxSize = 2
	if d := Decide(Observation{Pods: pods(9, corev1.PodPending)}, g3, now); d.Target != 2 || d.Create != 2 {
		t.Fatalf("capped by MaxSize: %+v", d)
	}
	// No intent: hold, then teardown of everything.
	g = group(ready("a", time.Hour), ready("b", time.Hour), Node{Slot: "c"})
	d = Decide(Observation{}, g, now)
	if d.Action != ActionHold || d.Requeue != 2*time.Minute {
		t.Fatalf("hold: %+v", d)
	}
	g.Last = &Last{At: now, Action: ActionHold}
	if d := Decide(Observation{}, g, now.Add(time.Minute)); d.Action != ActionNone || d.Requeue != time.Minute {
		t.Fatalf("in the hold: %+v", d)
	}
	d = Decide(Observation{}, g, now.Add(2*time.Minute))
	if d.Action != ActionTeardown || !slices.Equal(d.Release, []string{"a", "b", "c"}) {
		t.Fatalf("teardown: %+v", d)
	}
	// Work back during the hold: the hold ends (recorded, so the next
	// idle period holds from its own start).
	if d := Decide(Observation{Pods: pods(3, corev1.PodRunning)}, g, now.Add(time.Minute)); d.Action != ActionSteady {
		t.Fatalf("work back: %+v", d)
	}
	// No node, no work: nothing.
	if d := Decide(Observation{}, group(), now); d.Record() {
		t.Fatalf("idle empty group: %+v", d)
	}
}

// TestScaleInNeverPicksTenantWork: per-node scale-in releases one idle node
// per hold, emptiest then newest, never one running tenant work, never
// below the target.
func TestScaleInNeverPicksTenantWork(t *testing.T) {
	dsOwner := ownedBy("DaemonSet", "cilium")
	sys := func(p *corev1.Pod) *corev1.Pod { p.Namespace = ControlPlaneNamespace; return p }
	o := Observation{Pods: []*corev1.Pod{
		on(pod("job-1", corev1.PodRunning), "busy"),                     // tenant work
		sys(on(pod("agent-a", corev1.PodRunning, dsOwner), "idle-old")), // baseline
		sys(on(pod("agent-b", corev1.PodRunning, dsOwner), "idle-new")), // baseline
		sys(on(pod("agent-c", corev1.PodRunning, dsOwner), "idle-new2")),
		on(pod("done", corev1.PodSucceeded), "idle-new2"),
		sys(on(pod("cache", corev1.PodRunning, dsOwner), "idle-full")),
		sys(on(pod("cache-2", corev1.PodRunning, dsOwner), "idle-full")),
	}}
	// Demand 1 -> target 1; five nodes.
	g := group(ready("busy", 3*time.Hour), ready("idle-old", 2*time.Hour), ready("idle-new", time.Hour), ready("idle-new2", time.Hour+time.Minute), ready("idle-full", time.Minute))
	g.MaxSize, g.Free = 5, 0
	d := Decide(o, g, now)
	if d.Action != ActionSurplus || d.Target != 1 || slices.Contains(d.Slots, "busy") {
		t.Fatalf("surplus: %+v", d)
	}
	// Emptiest first (1 pod before 2), then newest.
	if want := []string{"idle-new", "idle-new2", "idle-old", "idle-full"}; !slices.Equal(d.Slots, want) {
		t.Fatalf("idle order %v, want %v", d.Slots, want)
	}
	g.Last = &Last{At: now, Action: ActionSurplus, Slots: d.Slots}
	if d := Decide(o, g, now.Add(time.Minute)); d.Record() {
		t.Fatalf("released inside the hold: %+v", d)
	}
	d = Decide(o, g, now.Add(2*time.Minute))
	if d.Action != ActionRelease || !slices.Equal(d.Release, []string{"idle-new"}) {
		t.Fatalf("release: %+v", d)
	}
	// A watched node takes work: the hold restarts, and it is not a candidate.
	o2 := o
	o2.Pods = append(slices.Clone(o.Pods), on(pod("job-2", corev1.PodRunning), "idle-new"))
	d = Decide(o2, g, now.Add(2*time.Minute))
	if d.Action != ActionSurplus || slices.Contains(d.Slots, "idle-new") || slices.Contains(d.Slots, "busy") {
		t.Fatalf("restart: %+v", d)
	}
	// Only busy nodes over the target: nothing is released, ever.
	busy := Observation{Pods: []*corev1.Pod{on(pod("x", corev1.PodRunning), "a"), on(pod("y", corev1.PodPending), "b")}}
	gb := group(ready("a", time.Hour), ready("b", time.Hour), ready("c", time.Hour))
	gb.Options.PodsPerNode = 8
	gb.Last = &Last{At: now.Add(-time.Hour), Action: ActionSurplus, Slots: []string{"c"}}
	busy.Pods = append(busy.Pods, on(pod("z", corev1.PodRunning), "c"))
	for i := 0; i < 5; i++ {
		d := Decide(busy, gb, now.Add(time.Duration(i)*time.Hour))
		if len(d.Release) > 0 {
			t.Fatalf("released a node with tenant work: %+v", d)
		}
		if d.Record() {
			gb.Last = &Last{At: now, Action: d.Action, Slots: d.Slots}
		}
	}
	// Never below the target: 2 nodes, target 2, both idle of tenant work.
	two := Observation{Pods: pods(2, corev1.PodPending)}
	gt := group(ready("a", time.Hour), ready("b", time.Hour))
	gt.Last = &Last{At: now.Add(-time.Hour), Action: ActionSurplus, Slots: []string{"a", "b"}}
	if d := Decide(two, gt, now); len(d.Release) > 0 || d.Action != ActionSteady {
		t.Fatalf("below target: %+v", d)
	}
}
