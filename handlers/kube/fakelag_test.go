package kube_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/kube"
)

func lagged(t *testing.T, delay time.Duration) (*kube.Fake, *kube.Cluster, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	f := kube.NewFakeWith(kube.FakeOptions{Clock: clk, WatchDelay: delay})
	c := f.NewCluster(kube.Options{Namespace: "ns", Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	t.Cleanup(func() { cancel(); c.Shutdown() })
	if !c.WaitForSync(ctx) {
		t.Fatal("no sync")
	}
	return f, c, clk
}

// cachedJob: a Job someone else wrote is read from the informer only.
func cachedJob(c *kube.Cluster, name string) bool {
	_, ok := c.Job(name)
	return ok
}

func jobSpec() events.JobSpec {
	return events.JobSpec{PodSpec: json.RawMessage(`{"containers":[{"name":"x","image":"i"}]}`)}
}

// TestFakeWatchesLagOnItsClock: a write reaches the informers only once
// the fake's clock passed its delay (a Settle before that does not wait
// for it), while a read through the client sees it at once.
func TestFakeWatchesLagOnItsClock(t *testing.T) {
	f, c, clk := lagged(t, time.Second)
	ctx := context.Background()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}}
	if _, err := f.BatchV1().Jobs("ns").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.BatchV1().Jobs("ns").Get(ctx, "j", metav1.GetOptions{}); err != nil {
		t.Fatalf("a read through the client: %v", err)
	}
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if cachedJob(c, "j") {
		t.Fatal("the informer saw the write before its delay passed")
	}
	if _, ok, err := c.GetJob(ctx, "j"); err != nil || !ok {
		t.Fatalf("GetJob: %v %v", ok, err)
	}
	clk.Step(time.Second)
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if !cachedJob(c, "j") {
		t.Fatal("the informer did not see the write after its delay")
	}
}

// TestClusterReadsItsOwnWrites: on informers that lag, the adapter's own
// create, cordon and delete are what the next read shows; a second cordon
// patches nothing; the Job a create found is reported found.
func TestClusterReadsItsOwnWrites(t *testing.T) {
	f, c, clk := lagged(t, time.Hour)
	ctx := context.Background()
	if err := f.RegisterNode(ctx, "a", "homelab://a", nil, clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	patches := 0
	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) { patches++; return false, nil, nil })
	for range 3 {
		if err := c.Cordon(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if n, ok := c.Node("a"); !ok || !n.Unschedulable || patches != 1 {
		t.Fatalf("node %+v (%v) after %d patches, want cordoned after 1", n, ok, patches)
	}
	req := handlers.JobRequest{Name: "a-1-start-1", Slot: "a", Operation: decide.OperationStartup,
		Spec: jobSpec()}
	if created, err := c.CreateJob(ctx, req); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if _, ok := c.Job(req.Name); !ok {
		t.Fatal("the Job just created is not read")
	}
	if created, err := c.CreateJob(ctx, req); err != nil || created {
		t.Fatalf("second create: created %v (want found), %v", created, err)
	}
	if err := c.DeleteNode(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Node("a"); ok {
		t.Fatal("the Node just deleted is still read")
	}
	clk.Step(time.Hour)
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Job(req.Name); !ok {
		t.Fatal("the informer did not deliver the Job")
	}
}

// TestFakeRefusesWhatAnAPIServerRefuses: invalid names, a second create,
// an update from a stale resourceVersion; and its TTL controller removes a
// finished Job after ttlSecondsAfterFinished.
func TestFakeRefusesWhatAnAPIServerRefuses(t *testing.T) {
	f, _, clk := lagged(t, time.Millisecond)
	ctx := context.Background()
	jobs := f.BatchV1().Jobs("ns")
	for _, name := range []string{"Upper", "a_b", strings.Repeat("j", 64)} {
		if _, err := jobs.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("Job %q: %v, want Invalid", name, err)
		}
	}
	if _, err := f.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a/b"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("Node a/b: %v, want Invalid", err)
	}
	ttl := int32(30)
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}, Spec: batchv1.JobSpec{TTLSecondsAfterFinished: &ttl}}
	first, err := jobs.Create(ctx, j, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Create(ctx, j, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	first.Labels = map[string]string{"x": "1"}
	if _, err := jobs.Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	first.Labels["x"] = "2" // still the first resourceVersion
	if _, err := jobs.Update(ctx, first, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want Conflict", err)
	}
	if err := f.FinishJob(ctx, "ns", "j", true, "", "", clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Step(29 * time.Second)
	if _, err := jobs.Get(ctx, "j", metav1.GetOptions{}); err != nil {
		t.Fatalf("before its TTL: %v", err)
	}
	clk.Step(time.Second)
	if _, err := jobs.Get(ctx, "j", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after its TTL: %v, want NotFound", err)
	}
}
