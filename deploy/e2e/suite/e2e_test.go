package suite

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/machines"
)

const (
	lOp      = machines.LabelOperation
	lSlot    = machines.LabelSlot
	lClaim   = machines.LabelClaim
	lAttempt = machines.LabelAttempt
)

// 1. IncreaseSize(2) -> two claims -> two startup Jobs run by the real
// controller-manager -> Nodes register -> readiness gate (a readiness taint
// removed late) -> both claims ready, TargetSize 2.
func TestScaleUpTwo(t *testing.T) {
	dumpOnFailure(t)
	for _, s := range []string{"boot-1", "boot-2"} {
		model.SetKnobs(s, machines.Knobs{BootDelay: time.Second, ReadyDelay: 6 * time.Second})
	}
	increaseSize(t, "boot", 2)
	if got := targetSize(t, "boot"); got != 2 {
		t.Fatalf("TargetSize right after IncreaseSize(2) = %d, want 2", got)
	}
	waitT(t, 60*time.Second, "two startup Jobs completed by the controller-manager", func() (bool, string) {
		js := jobs(t, map[string]string{lOp: "startup"})
		var done []string
		for _, j := range js {
			if s := j.Labels[lSlot]; (s == "boot-1" || s == "boot-2") && jobPhase(&j) == "Complete" {
				done = append(done, j.Name)
			}
		}
		return len(done) == 2, strings.Join(done, ",")
	})
	for _, s := range []string{"boot-1", "boot-2"} {
		js := jobs(t, map[string]string{lOp: "startup", lSlot: s})
		if len(js) != 1 {
			t.Fatalf("slot %s: %d startup Jobs, want 1", s, len(js))
		}
		j := js[0]
		if j.Labels[lClaim] == "" || j.Labels[lAttempt] != "1" || !strings.HasPrefix(j.Name, j.Labels[lClaim]+"-start-") {
			t.Errorf("startup Job %s labels %v: want a claim, attempt 1, name <claim>-start-<attempt>", j.Name, j.Labels)
		}
	}
	// The readiness gate: Ready but still tainted is not ready.
	waitT(t, 30*time.Second, "boot-1 registered, Ready, still carrying the readiness taint", func() (bool, string) {
		n, ok := node(t, "boot-1")
		if !ok {
			return false, "no node"
		}
		if !nodeReady(n) || !hasTaint(n, readyTaint) {
			return false, "ready=" + strconv.FormatBool(nodeReady(n)) + " tainted=" + strconv.FormatBool(hasTaint(n, readyTaint))
		}
		if n.Spec.ProviderID != providerID("boot-1") {
			t.Fatalf("providerID %q", n.Spec.ProviderID)
		}
		return true, ""
	})
	if in := instances(t, "boot")[providerID("boot-1")]; in == nil || in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning {
		t.Fatalf("boot-1 is Ready but tainted: instance %v, want creating (the readiness gate holds)", in)
	}
	waitT(t, 60*time.Second, "both claims ready (instances running)", func() (bool, string) {
		ins := instances(t, "boot")
		n := 0
		for _, s := range []string{"boot-1", "boot-2"} {
			if in := ins[providerID(s)]; in != nil && in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning {
				n++
			}
		}
		return n == 2, describeInstances(ins)
	})
	if got := targetSize(t, "boot"); got != 2 {
		t.Fatalf("TargetSize = %d, want 2", got)
	}
	for _, s := range []string{"boot-1", "boot-2"} {
		n, ok := node(t, s)
		if !ok || !nodeReady(n) || hasTaint(n, readyTaint) || n.Spec.Unschedulable {
			t.Fatalf("node %s: present=%v, want Ready, untainted, schedulable", s, ok)
		}
	}
}

// 2. DeleteNodes on one, by providerID -> cordon -> shutdown Job -> Node
// gone -> claim completed, TargetSize 1, the powered-off Node removed.
func TestDeleteNodesByProviderID(t *testing.T) {
	dumpOnFailure(t)
	if got := targetSize(t, "boot"); got != 2 {
		t.Skipf("needs TestScaleUpTwo's two ready claims (TargetSize %d)", got)
	}
	claim := jobs(t, map[string]string{lOp: "startup", lSlot: "boot-2"})[0].Labels[lClaim]
	w := watchNode(t, "boot-2")
	from := len(model.EventsOf("boot-2"))
	_, err := provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{
		Id:    "boot",
		Nodes: []*pb.ExternalGrpcNode{{ProviderID: providerID("boot-2"), Name: "boot-2"}},
	})
	if err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	if got := targetSize(t, "boot"); got != 1 {
		t.Errorf("TargetSize right after DeleteNodes = %d, want 1", got)
	}
	waitChan(t, w.cordoned, 30*time.Second, "boot-2 cordoned")
	waitT(t, 60*time.Second, "the claim's shutdown Job completed", func() (bool, string) {
		js := jobs(t, map[string]string{lOp: "shutdown", lClaim: claim})
		if len(js) == 0 {
			return false, "no shutdown Job"
		}
		return jobPhase(&js[len(js)-1]) == "Complete", js[len(js)-1].Name + " " + jobPhase(&js[len(js)-1])
	})
	waitMachine(t, "boot-2", "power-off", from, 30*time.Second)
	waitChan(t, w.deleted, 60*time.Second, "the powered-off Node boot-2 deleted by claimstream")
	waitT(t, 30*time.Second, "claim completed: boot-2 no longer an instance, boot-1 running", func() (bool, string) {
		ins := instances(t, "boot")
		ok := ins[providerID("boot-2")] == nil && ins[providerID("boot-1")].GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning
		return ok, describeInstances(ins)
	})
	if got := targetSize(t, "boot"); got != 1 {
		t.Fatalf("TargetSize = %d, want 1", got)
	}
	if n, ok := node(t, "boot-1"); !ok || n.Spec.Unschedulable {
		t.Fatalf("boot-1 must stay, schedulable")
	}
}

// 3. A machine that never boots -> the claim fails within the group's
// short budget (seconds, not 12m10s), its machine is force-shut-down, the
// slot is free and the next IncreaseSize is attempt 2.
//
// Which timer fails it: the startup Job succeeds and no Node registers, so
// the readiness gate's registration wait (10s after the Job) fires long
// before the claim's deadline (requestedAt + budget): claimstream reports
// failed/ReadinessGateTimeout ("node ... did not register within 10s of the
// startup Job"). DeadlineExceeded is the backstop when no stage timer fired
// (both are boot failures, error class OutOfResources for
// cluster-autoscaler).
func TestNeverBootsFails(t *testing.T) {
	dumpOnFailure(t)
	model.SetKnobs("fail-1", machines.Knobs{NeverBoots: true})
	start := time.Now()
	increaseSize(t, "fail", 1)
	var claim string
	waitT(t, 30*time.Second, "startup Job of fail-1 created", func() (bool, string) {
		js := jobs(t, map[string]string{lOp: "startup", lSlot: "fail-1"})
		if len(js) == 0 {
			return false, ""
		}
		claim = js[0].Labels[lClaim]
		return true, ""
	})
	var info *pb.InstanceErrorInfo
	waitT(t, 4*time.Minute, "the claim failed (errorInfo on the instance)", func() (bool, string) {
		in := instances(t, "fail")[providerID("fail-1")]
		if e := in.GetStatus().GetErrorInfo(); e != nil {
			info = e
			return true, ""
		}
		return false, describeInstances(instances(t, "fail"))
	})
	took := time.Since(start)
	t.Logf("claim %s failed %s after %s: %s", claim, info.GetErrorCode(), took.Round(time.Second), info.GetErrorMessage())
	switch info.GetErrorCode() {
	case "DeadlineExceeded":
	case "ReadinessGateTimeout":
		if !strings.Contains(info.GetErrorMessage(), "did not register") {
			t.Errorf("ReadinessGateTimeout message %q: want the registration wait", info.GetErrorMessage())
		}
	default:
		t.Errorf("failure reason %q, want DeadlineExceeded or ReadinessGateTimeout (registration wait)", info.GetErrorCode())
	}
	if info.GetInstanceErrorClass() != 1 { // cloudprovider.OutOfResourcesErrorClass
		t.Errorf("error class %d, want 1 (OutOfResources)", info.GetInstanceErrorClass())
	}
	// The budget of the group: 20s + 30s + 10s + 15s + 10s + 1m = 2m25s.
	if took > 2*time.Minute+25*time.Second+30*time.Second {
		t.Errorf("the failure took %s, beyond the group's budget", took)
	}
	if got := targetSize(t, "fail"); got != 0 {
		t.Fatalf("TargetSize right after the failure = %d, want 0 (slot free)", got)
	}
	starts := jobs(t, map[string]string{lOp: "startup", lClaim: claim})
	if len(starts) != 1 {
		t.Errorf("startup Jobs of the failed claim: %d, want 1", len(starts))
	}
	waitT(t, 30*time.Second, "a shutdown Job fired for the failed claim (force shutdown)", func() (bool, string) {
		return len(jobs(t, map[string]string{lOp: "shutdown", lClaim: claim})) > 0, ""
	})
	// The machine is repaired; the next claim of the slot is attempt 2.
	model.SetKnobs("fail-1", machines.Knobs{BootDelay: time.Second, ReadyDelay: time.Second})
	increaseSize(t, "fail", 1)
	var next string
	waitT(t, 30*time.Second, "the next startup Job of fail-1", func() (bool, string) {
		for _, j := range jobs(t, map[string]string{lOp: "startup", lSlot: "fail-1"}) {
			if j.Labels[lClaim] != claim {
				next = j.Name
				if a := j.Labels[lAttempt]; a != "2" {
					t.Fatalf("next startup Job %s has attempt %q, want 2 (labels %v)", j.Name, a, j.Labels)
				}
				return true, ""
			}
		}
		return false, ""
	})
	t.Logf("next startup Job %s is attempt 2", next)
	waitT(t, 90*time.Second, "the repaired machine's claim ready", func() (bool, string) {
		in := instances(t, "fail")[providerID("fail-1")]
		return in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning && in.GetStatus().GetErrorInfo() == nil, describeInstances(instances(t, "fail"))
	})
}

// 4. A Node that joins with no claim -> the input law: cordoned and shut down.
func TestUnclaimedNodeShutDown(t *testing.T) {
	dumpOnFailure(t)
	w := watchNode(t, "law-1")
	from := len(model.EventsOf("law-1"))
	model.SetKnobs("law-1", machines.Knobs{ReadyDelay: time.Second})
	if err := model.PowerOn(ctxFor(t, 30*time.Second), "law-1"); err != nil {
		t.Fatal(err)
	}
	waitChan(t, w.cordoned, 60*time.Second, "the unclaimed Node law-1 cordoned")
	waitT(t, 60*time.Second, "a shutdown Job for law-1 completed", func() (bool, string) {
		js := jobs(t, map[string]string{lOp: "shutdown", lSlot: "law-1"})
		if len(js) == 0 {
			return false, "none"
		}
		return jobPhase(&js[0]) == "Complete", js[0].Name
	})
	if js := jobs(t, map[string]string{lOp: "startup", lSlot: "law-1"}); len(js) != 0 {
		t.Fatalf("startup Jobs for law-1: %d, want none", len(js))
	}
	waitMachine(t, "law-1", "power-off", from, 30*time.Second)
	waitChan(t, w.deleted, 60*time.Second, "the powered-off Node law-1 deleted")
	if got := targetSize(t, "law"); got != 0 {
		t.Fatalf("TargetSize(law) = %d, want 0", got)
	}
}

// 5. kill -9 of the server mid-boot, start again: the claim finishes and
// exactly one startup Job exists for that attempt.
func TestKillNineMidBoot(t *testing.T) {
	dumpOnFailure(t)
	model.SetKnobs("crash-1", machines.Knobs{BootDelay: 6 * time.Second, ReadyDelay: 2 * time.Second})
	from := len(model.EventsOf("crash-1"))
	bootTarget := targetSize(t, "boot")
	increaseSize(t, "crash", 1)
	var job string
	waitT(t, 30*time.Second, "startup Job of crash-1 created", func() (bool, string) {
		js := jobs(t, map[string]string{lOp: "startup", lSlot: "crash-1"})
		if len(js) == 0 {
			return false, ""
		}
		job = js[0].Name
		return true, ""
	})
	server.Kill()
	t.Logf("killed the server (-9) with %s created", job)
	if n, ok := node(t, "crash-1"); ok && nodeReady(n) && !hasTaint(n, readyTaint) {
		t.Fatalf("crash-1 already ready before the kill: not mid-boot")
	}
	// The restart comes once the machine has begun its boot from that Job
	// (before the kill or while the server is down): the restarted server
	// finds a boot under way, not a Job alone.
	waitMachine(t, "crash-1", "boot", from, 30*time.Second)
	if err := server.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := waitProvider(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	waitT(t, 90*time.Second, "the claim ready after the restart", func() (bool, string) {
		in := instances(t, "crash")[providerID("crash-1")]
		return in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning, describeInstances(instances(t, "crash"))
	})
	js := jobs(t, map[string]string{lOp: "startup", lSlot: "crash-1"})
	if len(js) != 1 {
		var names []string
		for _, j := range js {
			names = append(names, j.Name)
		}
		t.Fatalf("startup Jobs of crash-1: %v, want exactly one", names)
	}
	if js[0].Name != job || js[0].Labels[lAttempt] != "1" {
		t.Fatalf("startup Job %s (%v), want %s attempt 1", js[0].Name, js[0].Labels, job)
	}
	if got := targetSize(t, "crash"); got != 1 {
		t.Fatalf("TargetSize(crash) = %d, want 1", got)
	}
	// Nothing else has changed in the other groups across the restart.
	if got := targetSize(t, "boot"); got != bootTarget {
		t.Errorf("TargetSize(boot) after the restart = %d, want %d as before the kill", got, bootTarget)
	}
}

// 6. The server ran every scenario above with a ServiceAccount token bound
// to the chart's RBAC only (not system:masters).
func TestServerRanWithChartRBACOnly(t *testing.T) {
	if serverUser == "e2e-admin" {
		t.Skip("CLAIMSTREAM_E2E_ADMIN set: the server ran as system:masters")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", server.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ui := r.Status.UserInfo
	t.Logf("the server authenticated as %s, groups %v", ui.Username, ui.Groups)
	if ui.Username != serverUser {
		t.Fatalf("user %q, want %q", ui.Username, serverUser)
	}
	for _, g := range ui.Groups {
		if g == "system:masters" {
			t.Fatal("the server's user is in system:masters")
		}
	}
	// Least privilege: what the server may and may not do.
	for _, c := range []struct {
		ra      authorizationv1.ResourceAttributes
		allowed bool
	}{
		{authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "patch"}, true},
		{authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "delete"}, true},
		{authorizationv1.ResourceAttributes{Group: "batch", Resource: "jobs", Verb: "create", Namespace: namespace}, true},
		{authorizationv1.ResourceAttributes{Group: "batch", Resource: "jobs", Verb: "create", Namespace: "default"}, false},
		{authorizationv1.ResourceAttributes{Group: "batch", Resource: "jobs", Verb: "delete", Namespace: namespace}, true},
		{authorizationv1.ResourceAttributes{Group: "batch", Resource: "jobs", Verb: "delete", Namespace: "default"}, false},
		{authorizationv1.ResourceAttributes{Group: "batch", Resource: "jobs", Verb: "update", Namespace: namespace}, false},
		{authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "create"}, false},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "list"}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "eviction", Verb: "create", Namespace: "default"}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "create", Namespace: namespace}, false},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "watch"}, false}, // no builtin group: no workload informers
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "list"}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: namespace}, false},
		// The power watch reads the Secrets the chart lists, no other.
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: namespace, Name: "bmc"}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: namespace, Name: "claimstream-api-token"}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "default", Name: "bmc"}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: namespace}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch", Namespace: namespace}, false},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "list", Namespace: namespace}, false},
		// The default event source's cluster id: that one Namespace, read only.
		{authorizationv1.ResourceAttributes{Resource: "namespaces", Verb: "get", Name: "kube-system"}, true},
		{authorizationv1.ResourceAttributes{Resource: "namespaces", Verb: "get", Name: "default"}, false},
		{authorizationv1.ResourceAttributes{Resource: "namespaces", Verb: "list"}, false},
	} {
		ra := c.ra
		rv, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rv.Status.Allowed != c.allowed {
			t.Errorf("%s %s/%s in %q: allowed=%v, want %v", ra.Verb, ra.Group, ra.Resource, ra.Namespace, rv.Status.Allowed, c.allowed)
		}
	}
	// No request of the server was denied, in any of its runs.
	logs, _ := filepath.Glob(filepath.Join(env.Dir, "logs", "claimstream-*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("%s: %s", filepath.Base(l), line)
			}
		}
	}
}
