package sim_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// A finished Job without a ttlSecondsAfterFinished of its own is deleted
// FinishedJobTTL after it finished; without FinishedJobTTL it stays, as
// Kubernetes keeps it.
func TestFinishedJobsWithoutATTLGoAfterFinishedJobTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"kept", 0}, {"collected", 30 * time.Minute}} {
		t.Run(tc.name, func(t *testing.T) {
			h, w := newWorld(t, sim.Timing{FinishedJobTTL: tc.ttl})
			declare(t, h, "g", events.GroupSpec{}, "a")
			h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
			runUntil(t, w, 15*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
			job := claimOf(h, "a").StartupJob
			exists := func() bool {
				t.Helper()
				_, err := w.Fake.BatchV1().Jobs("claimstream").Get(context.Background(), job, metav1.GetOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				return err == nil
			}
			// The Job finished about 75s before the claim was ready.
			if err := w.RunFor(context.Background(), 27*time.Minute); err != nil {
				t.Fatal(err)
			}
			if !exists() {
				t.Fatalf("Job %s deleted before its TTL", job)
			}
			if err := w.RunFor(context.Background(), 5*time.Minute); err != nil {
				t.Fatal(err)
			}
			if got, want := exists(), tc.ttl == 0; got != want {
				t.Fatalf("Job %s exists=%t some 33 minutes after it finished, want %t", job, got, want)
			}
		})
	}
}
