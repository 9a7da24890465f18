package leader

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/claimstream/claimstream/events/eventstest"
)

// The Lease's holder identity is the replica's stable name: a replica
// restarted while its Lease is still fresh renews it at once, where any
// other replica waits the lease out.
func TestKubeLeaseReplicaTakesItsOwnFreshLeaseBackAtOnce(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	cs := fake.NewSimpleClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "claimstream", Name: "claimstream"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("claimstream-0"),
			LeaseDurationSeconds: ptr.To[int32](60),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	})
	run := func(name string) (*KubeLease, *atomic.Bool) {
		k, err := NewKubeLease(KubeConfig{Client: cs, Namespace: "claimstream", Name: "claimstream", Self: Holder{Replica: name}, Timing: Timing{LeaseDuration: time.Minute, RenewDeadline: 40 * time.Second, RetryPeriod: 100 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		led := &atomic.Bool{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			k.Run(ctx, func(ctx context.Context) { led.Store(true); <-ctx.Done() })
		}()
		t.Cleanup(func() { cancel(); <-done })
		return k, led
	}
	other, otherLed := run("claimstream-1")
	self, selfLed := run("claimstream-0")
	eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !selfLed.Load() || !self.Leading() {
			return errors.New("claimstream-0 did not take its own Lease back")
		}
		return nil
	})
	if otherLed.Load() || other.Leading() {
		t.Fatal("claimstream-1 took a Lease that was fresh for 60s")
	}
	if got := other.Leader().Replica; got != "claimstream-0" {
		t.Fatalf("claimstream-1 follows %q", got)
	}
}
