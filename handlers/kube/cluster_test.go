package kube_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/kube"
)

func start(t *testing.T) (*kube.Fake, *kube.Cluster) {
	t.Helper()
	f := kube.NewFake()
	f.StampCreation(func() time.Time { return time.Unix(1000, 0) }, nil)
	c := f.NewCluster(kube.Options{Namespace: "ns"})
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	t.Cleanup(func() { cancel(); c.Shutdown() })
	if !c.WaitForSync(ctx) {
		t.Fatal("no sync")
	}
	return f, c
}

func TestCreateJobShapeAndAlreadyExists(t *testing.T) {
	f, c := start(t)
	ctx := context.Background()
	ttl := int32(600)
	req := handlers.JobRequest{
		Name: "a-123456-start-1", Slot: "a", Claim: "a-123456", Attempt: 1, Operation: decide.OperationStartup,
		Spec:    events.JobSpec{PodSpec: json.RawMessage(`{"restartPolicy":"OnFailure","containers":[{"name":"x","image":"i","env":[{"name":"CLAIMSTREAM_SLOT","value":"stale"}]},{"name":"y","image":"i"}]}`), TTLSecondsAfterFinished: &ttl},
		Timeout: 5 * time.Minute,
		Labels:  map[string]string{handlers.LabelClaim: "a-123456", handlers.LabelSlot: "a", handlers.LabelOperation: decide.OperationStartup},
		Env:     map[string]string{handlers.EnvSlot: "a", handlers.EnvClaim: "a-123456"},
	}
	for i, want := range []bool{true, false} {
		created, err := c.CreateJob(ctx, req)
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		if created != want {
			t.Fatalf("create %d: created %v, want %v (the second finds it: AlreadyExists)", i, created, want)
		}
	}
	j, err := f.BatchV1().Jobs("ns").Get(ctx, req.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *j.Spec.ActiveDeadlineSeconds != 300 || *j.Spec.BackoffLimit != 0 || j.Spec.TTLSecondsAfterFinished != nil || j.Spec.Template.Spec.RestartPolicy != "Never" || len(j.OwnerReferences) != 0 {
		t.Fatalf("job spec %+v", j.Spec)
	}
	for _, ct := range j.Spec.Template.Spec.Containers {
		n := 0
		for _, e := range ct.Env {
			if e.Name == handlers.EnvSlot {
				n++
				if e.Value != "a" {
					t.Fatalf("env %v", ct.Env)
				}
			}
		}
		if n != 1 {
			t.Fatalf("container %s: %d %s", ct.Name, n, handlers.EnvSlot)
		}
	}
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	st, ok := c.Job(req.Name)
	if !ok || st.Phase != handlers.JobRunning || st.CreatedAt.IsZero() {
		t.Fatalf("job state %+v %v", st, ok)
	}
	if err := f.FinishJob(ctx, "ns", req.Name, false, handlers.JobReasonDeadlineExceeded, "", time.Unix(2000, 0)); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	if st, _ := c.Job(req.Name); st.Phase != handlers.JobFailed || st.Reason != handlers.JobReasonDeadlineExceeded || !st.FinishedAt.Equal(time.Unix(2000, 0)) {
		t.Fatalf("failed job %+v", st)
	}
	if jobs := c.SlotJobs("a"); len(jobs) != 1 || jobs[0].Name != req.Name || jobs[0].OwnTTL {
		t.Fatalf("slot a's Jobs %+v, want %s with no TTL of its own", jobs, req.Name)
	}
	// The delete takes the pods too (the API's default for a Job orphans
	// them), and the next read sees it gone.
	var policy *metav1.DeletionPropagation
	f.PrependReactor("delete", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		policy = a.(k8stesting.DeleteActionImpl).DeleteOptions.PropagationPolicy
		return false, nil, nil
	})
	for range 2 { // NotFound is success
		if err := c.DeleteJob(ctx, req.Name); err != nil {
			t.Fatal(err)
		}
	}
	if policy == nil || *policy != metav1.DeletePropagationBackground {
		t.Fatalf("propagation %v, want Background", policy)
	}
	if _, ok := c.Job(req.Name); ok || len(c.SlotJobs("a")) != 0 {
		t.Fatal("a deleted Job is still read")
	}
	if _, err := kube.BuildJob(kube.JobDefaults{Namespace: "ns"}, handlers.JobRequest{Name: "x"}); err == nil {
		t.Fatal("a Job with no containers was built")
	}
}

func TestNodeWrites(t *testing.T) {
	f, c := start(t)
	ctx := context.Background()
	if err := c.Cordon(ctx, "missing"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNode(ctx, "missing"); err != nil {
		t.Fatal(err)
	}
	if err := f.RegisterNode(ctx, "a.lan", "homelab://a.lan", []events.Taint{{Key: "node.cilium.io/agent-not-ready", Effect: "NoExecute"}}, time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	if err := c.Cordon(ctx, "a.lan"); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	if err := c.ApplySlotConfig(ctx, "a.lan", map[string]string{"rack": "b"}, []events.Taint{{Key: "slow", Effect: "PreferNoSchedule"}}); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	n, ok := c.Node("a.lan")
	if !ok || !n.Unschedulable || n.Labels["rack"] != "b" || len(n.Taints) != 2 || n.ProviderID != "homelab://a.lan" || n.Ready {
		t.Fatalf("node %+v", n)
	}
	if err := f.SetNodeReady(ctx, "a.lan", true, time.Unix(1001, 0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Uncordon(ctx, "a.lan"); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	if n, _ := c.Node("a.lan"); n.Unschedulable || !n.Ready {
		t.Fatalf("node %+v", n)
	}
	st := n.State()
	if !st.Present || st.Name != "a.lan" {
		t.Fatalf("state %+v", st)
	}
	if err := c.DeleteNode(ctx, "a.lan"); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	if _, ok := c.Node("a.lan"); ok {
		t.Fatal("node still cached")
	}
}
