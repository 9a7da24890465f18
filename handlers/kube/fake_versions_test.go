package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/handlers/kube"
)

// TestFakeVersionsFollowEveryWriteWithoutCopyingAnUnchangedCluster: the
// versions Settle waits for are the newest after every write and delete,
// and asking again with nothing written copies nothing (Settle asks
// between every two steps of a replayed week).
func TestFakeVersionsFollowEveryWriteWithoutCopyingAnUnchangedCluster(t *testing.T) {
	ctx := context.Background()
	f := kube.NewFakeWith(kube.FakeOptions{WatchDelay: -1}) // the bookkeeping, not the lag
	at := time.Unix(1000, 0)
	for i := range 100 {
		if err := f.RegisterNode(ctx, fmt.Sprintf("n-%d", i), "", nil, at); err != nil {
			t.Fatal(err)
		}
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}}
	if _, err := f.BatchV1().Jobs("ns").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	versions := f.Versions("ns")
	nodes, jobs := versions()
	if len(nodes) != 100 || len(jobs) != 1 || jobs["j"] == "" {
		t.Fatalf("%d nodes, jobs %v; want 100 and j", len(nodes), jobs)
	}
	if allocs := testing.AllocsPerRun(100, func() { versions(); f.WorkVersions() }); allocs != 0 {
		t.Errorf("asking an unchanged cluster allocates %.0f times, want 0", allocs)
	}

	before := nodes["n-7"]
	if err := f.SetNodeReady(ctx, "n-7", true, at); err != nil {
		t.Fatal(err)
	}
	nodes, _ = versions()
	if nodes["n-7"] == before || nodes["n-7"] == "" {
		t.Errorf("n-7 at %q after an update, was %q: want a newer version", nodes["n-7"], before)
	}
	if err := f.DeleteNodeObject(ctx, "n-8"); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteJob(ctx, "ns", "j"); err != nil {
		t.Fatal(err)
	}
	nodes, jobs = versions()
	if _, ok := nodes["n-8"]; ok || len(nodes) != 99 || len(jobs) != 0 {
		t.Errorf("after deleting n-8 and j: %d nodes (n-8 there: %v), jobs %v", len(nodes), ok, jobs)
	}
	if work := f.WorkVersions(); len(work["jobs"]) != 0 {
		t.Errorf("work versions still hold jobs %v", work["jobs"])
	}
}
