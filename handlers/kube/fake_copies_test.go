package kube_test

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/handlers/kube"
)

// The fake clientset stamps a resourceVersion on the copy of a written
// object its reaction already owns, not on another copy of it: a replay
// writes tens of thousands of Jobs, each carrying its pod spec. A Job
// created through the clientset still comes back stamped, and the caller's
// Job is left as it was.
func TestTheFakeStampsAWrittenJobWithoutCopyingItAgain(t *testing.T) {
	ctx := context.Background()
	f := kube.NewFakeWith(kube.FakeOptions{WatchDelay: -1}) // the stamp's copies, not the lag's bookkeeping
	spec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "up", Image: "busybox",
		Command: []string{"sh", "-c", "echo up"}, Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}}}}
	job := func(i int) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("j-%d", i), Labels: map[string]string{"a": "b", "c": "d"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	}
	mine := job(-1)
	got, err := f.BatchV1().Jobs("ns").Create(ctx, mine, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion == "" || mine.ResourceVersion != "" {
		t.Fatalf("created Job's resourceVersion %q, the caller's %q: want set, and the caller's left empty", got.ResourceVersion, mine.ResourceVersion)
	}
	i := 0
	perCreate := testing.AllocsPerRun(200, func() {
		i++
		if _, err := f.BatchV1().Jobs("ns").Create(ctx, job(i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	// A deep copy of this Job is 6 allocations; building it, the
	// clientset's own copies (the action twice, the tracker's store, the
	// answer) and the version log are the rest: 52 with the stamp's copy
	// (client-go v0.35), 46 without.
	t.Logf("%.0f allocations a Job create", perCreate)
	if perCreate > 48 && !raceEnabled {
		t.Fatalf("%.0f allocations a Job create, want at most 48 (the stamp copies the Job again?)", perCreate)
	}
}
