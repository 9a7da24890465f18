package machines

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

const testNamespace = "claimstream"

// completedJob is a lifecycle Job of a slot that has completed.
func completedJob(slot, op string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: slot + "-" + op, Namespace: testNamespace, UID: types.UID("uid-" + slot + "-" + op),
			Labels:      map[string]string{LabelOperation: op, LabelSlot: slot},
			Annotations: map[string]string{AnnotationSlot: slot},
		},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}},
	}
}

// waitAll waits (bounded by ctx) for every slot's event what.
func waitAll(ctx context.Context, t *testing.T, m *Model, slots []string, what string) {
	t.Helper()
	for _, s := range slots {
		if _, err := m.WaitEvent(ctx, s, what, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestModelTenThousandSlots: a pool of 10,000 machines boots and powers
// off over client-go's fake clientset. While all 10,000 wait out their
// boot delay the model holds timers, not a goroutine per machine, and a
// wait for one slot's event reads that slot's events only.
func TestModelTenThousandSlots(t *testing.T) {
	const n = 10000
	// The simple clientset: NewClientset's field-managed tracker takes
	// about 10ms a create at this size (minutes for 10,000 Jobs), and the
	// model applies no server-side patches.
	client := fake.NewSimpleClientset() //nolint:staticcheck // see above

	slots := make([]Slot, n)
	names := make([]string, n)
	for i := range slots {
		names[i] = fmt.Sprintf("m-%05d", i)
		slots[i] = Slot{Name: names[i]}
	}
	const boot = 15 * time.Second
	m := New(client, testNamespace, slots, Knobs{BootDelay: boot}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	jobs := client.BatchV1().Jobs(testNamespace)
	for _, s := range names {
		if _, err := jobs.Create(ctx, completedJob(s, "startup"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("created %d startup Jobs in %s", n, time.Since(began))
	// The model starts once they exist: the fake clientset's watch does
	// not resume from its list, so a Job created in between would be lost.
	before := runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("model: %v", err)
		}
	})
	waitAll(ctx, t, m, names, "boot")
	// Every machine now waits out its boot delay (none has registered).
	g := runtime.NumGoroutine()
	for _, e := range m.Events() {
		if e.What == "registered" {
			t.Fatalf("%s registered before the waits for the %d boots returned (%s after the Jobs, boot delay %s): a wait for one slot's event is too slow at this size", e.Slot, n, time.Since(began).Round(time.Millisecond), boot)
		}
	}
	if g-before > 1000 {
		t.Fatalf("%d goroutines for %d machines waiting to boot (%d before)", g, n, before)
	}
	waitAll(ctx, t, m, names, "registered")
	booted := time.Since(began)
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != n {
		t.Fatalf("%d Nodes registered, want %d", len(nodes.Items), n)
	}

	// The shutdown Jobs in batches of 50: the fake clientset's watch holds
	// 100 events and panics when it is full.
	began = time.Now()
	for from := 0; from < n; from += 50 {
		batch := names[from:min(from+50, n)]
		for _, s := range batch {
			if _, err := jobs.Create(ctx, completedJob(s, "shutdown"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitAll(ctx, t, m, batch, "power-off")
	}
	t.Logf("%d machines: startup Jobs to every Node registered %s (boot delay %s), shutdown Jobs to every power-off %s", n, booted.Round(time.Millisecond), boot, time.Since(began).Round(time.Millisecond))
	for _, s := range names[:10] {
		if m.On(s) {
			t.Fatalf("%s still on", s)
		}
	}
	if got := len(m.Events()); got != 3*n {
		t.Fatalf("%d events, want %d (boot, registered, power-off per machine)", got, 3*n)
	}
}
