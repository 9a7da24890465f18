package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
)

func testJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	srv := eventstest.StartServer(t)
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func openLease(t *testing.T, js jetstream.JetStream, name string, clk *testingclock.FakeClock, log *slog.Logger) *KVLease {
	t.Helper()
	l, err := OpenKVLease(context.Background(), js, KVConfig{Self: Holder{Replica: name, GRPCAddress: name + ":8086"}, Timing: DefaultTiming, Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Another holder's lease is taken only once its revision stayed the same
// for the lease duration on the taker's own clock, whatever the holder's
// record says its time was.
func TestKVLeaseTakesAnotherHoldersLeaseOnlyAfterItAgedOnItsOwnClock(t *testing.T) {
	js := testJS(t)
	ctx := context.Background()
	// a's clock is decades behind: its record's timestamp means nothing.
	ca := testingclock.NewFakeClock(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	cb := testingclock.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	a := openLease(t, js, "claimstream-0", ca, nil)
	b := openLease(t, js, "claimstream-1", cb, nil)

	revA, ok := a.tryAcquire(ctx, &kvWatch{})
	if !ok {
		t.Fatalf("a did not take a free lease")
	}
	w := &kvWatch{}
	if _, ok := b.tryAcquire(ctx, w); ok {
		t.Fatal("b took a lease a had just written")
	}
	if got := b.Leader().Replica; got != "claimstream-0" {
		t.Fatalf("b follows %q, want claimstream-0", got)
	}
	lease := DefaultTiming.LeaseDuration
	cb.Step(lease - time.Second)
	if _, ok := b.tryAcquire(ctx, w); ok {
		t.Fatalf("b took the lease %s after it first saw it (lease %s)", lease-time.Second, lease)
	}
	// a renews: b's wait starts again from the new revision.
	if _, err := a.kv.Update(ctx, leaseKey, a.record(ca.Now()), revA); err != nil {
		t.Fatal(err)
	}
	cb.Step(2 * time.Second)
	if _, ok := b.tryAcquire(ctx, w); ok {
		t.Fatal("b took a lease a renewed 0s ago on b's clock")
	}
	cb.Step(lease - time.Second)
	if _, ok := b.tryAcquire(ctx, w); ok {
		t.Fatalf("b took the renewed lease after %s", lease-time.Second)
	}
	cb.Step(time.Second)
	if _, ok := b.tryAcquire(ctx, w); !ok {
		t.Fatalf("b did not take a lease unchanged for %s on its clock", lease)
	}
	e, err := b.kv.Get(ctx, leaseKey)
	if err != nil {
		t.Fatal(err)
	}
	var rec LeaseRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.Replica != "claimstream-1" || rec.GRPCAddress != "claimstream-1:8086" {
		t.Fatalf("lease record after the take-over: %s (%v)", e.Value(), err)
	}
}

// A replica restarted after kill -9 (a new process, the same name) takes
// its own lease back at once.
func TestKVLeaseSameReplicaTakesItsLeaseBackAtOnce(t *testing.T) {
	js := testJS(t)
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Now())
	before := openLease(t, js, "claimstream-0", clk, nil)
	if _, ok := before.tryAcquire(ctx, &kvWatch{}); !ok {
		t.Fatal("first start did not take the lease")
	}
	after := openLease(t, js, "claimstream-0", testingclock.NewFakeClock(time.Now()), nil)
	if _, ok := after.tryAcquire(ctx, &kvWatch{}); !ok {
		t.Fatal("the restarted replica did not take its own lease back at once")
	}
}

// Leading is false once the last renewal is older than the renew deadline
// on the holder's own clock, before any other replica has done anything:
// what a leader stopped (SIGSTOP) past its lease reads when it resumes.
func TestKVLeaseNotRenewedWithinTheDeadlineIsNotLeading(t *testing.T) {
	js := testJS(t)
	clk := testingclock.NewFakeClock(time.Now())
	l := openLease(t, js, "claimstream-0", clk, nil)
	if _, ok := l.tryAcquire(context.Background(), &kvWatch{}); !ok {
		t.Fatal("no lease")
	}
	l.term.mu.Lock()
	l.term.leading = true
	l.term.mu.Unlock()
	deadline := DefaultTiming.RenewDeadline
	clk.Step(deadline - time.Second)
	if !l.Leading() {
		t.Fatalf("not leading %s after a renewal (deadline %s)", deadline-time.Second, deadline)
	}
	clk.Step(time.Second)
	if l.Leading() {
		t.Fatalf("still leading %s after the last renewal", deadline)
	}
}

// A leader whose lease is taken stops its work (the term's context ends
// and Run waits for it), logs why, becomes a follower, and campaigns
// again: once the other holder stops renewing, it leads a second term.
func TestKVLeaseLostLeadershipStopsTheWorkAndCampaignsAgain(t *testing.T) {
	js := testJS(t)
	logs, log := logcapture.New(slog.LevelInfo)
	ctx, cancel := context.WithCancel(context.Background())
	l, err := OpenKVLease(ctx, js, KVConfig{Self: Holder{Replica: "claimstream-0"}, Timing: Timing{LeaseDuration: 600 * time.Millisecond, RenewDeadline: 400 * time.Millisecond, RetryPeriod: 50 * time.Millisecond}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var terms, running atomic.Int32
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		l.Run(ctx, func(ctx context.Context) {
			terms.Add(1)
			running.Add(1)
			defer running.Add(-1)
			<-ctx.Done()
		})
	}()
	t.Cleanup(func() { cancel(); <-ran })
	eventstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if terms.Load() != 1 || !l.Leading() {
			return errors.New("not leading yet")
		}
		return nil
	})
	// Another replica writes the key (as a take-over would).
	e, err := l.kv.Get(ctx, leaseKey)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := json.Marshal(LeaseRecord{Holder: Holder{Replica: "claimstream-2"}})
	if _, err := l.kv.Update(ctx, leaseKey, other, e.Revision()); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if running.Load() != 0 || l.Leading() {
			return errors.New("still leading after the lease was taken")
		}
		return nil
	})
	// The term logs why it ended once its work has returned, and the
	// campaign logs whom it follows when it next reads the key: both come
	// after the work stops, so wait for them.
	eventstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if len(logs.Lines("lost leadership: another replica took the lease")) != 1 {
			return fmt.Errorf("no lost-leadership line:\n%s", logs)
		}
		if len(logs.Lines("following claimstream-2")) != 1 {
			return fmt.Errorf("no following line:\n%s", logs)
		}
		return nil
	})
	// claimstream-2 never renews: after the lease duration, a second term.
	eventstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if terms.Load() != 2 || !l.Leading() {
			return errors.New("no second term")
		}
		return nil
	})
}

// On a clean stop the holder deletes the key, so another replica leads
// at once instead of waiting out the lease.
func TestKVLeaseReleasedOnStop(t *testing.T) {
	js := testJS(t)
	ctx, cancel := context.WithCancel(context.Background())
	l, err := OpenKVLease(ctx, js, KVConfig{Self: Holder{Replica: "claimstream-0"}, Timing: Timing{LeaseDuration: time.Minute, RenewDeadline: 40 * time.Second, RetryPeriod: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { defer close(ran); l.Run(ctx, func(ctx context.Context) { <-ctx.Done() }) }()
	eventstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if !l.Leading() {
			return errors.New("not leading")
		}
		return nil
	})
	cancel()
	<-ran
	other := openLease(t, js, "claimstream-1", testingclock.NewFakeClock(time.Now()), nil)
	if _, ok := other.tryAcquire(context.Background(), &kvWatch{}); !ok {
		t.Fatal("the released lease was not free")
	}
}

// A replica whose work ends as soon as it leads (it cannot lead yet) does
// not spin through take, fail and release: it waits RetryPeriod before the
// next campaign, doubling after each short term.
func TestKVLeaseBacksOffAfterShortTerms(t *testing.T) {
	js := testJS(t)
	logs, log := logcapture.New(slog.LevelInfo)
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	timing := Timing{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := OpenKVLease(ctx, js, KVConfig{Self: Holder{Replica: "claimstream-0"}, Timing: timing, Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var terms atomic.Int32
	ran := make(chan struct{})
	go func() { defer close(ran); l.Run(ctx, func(context.Context) { terms.Add(1) }) }()
	t.Cleanup(func() { cancel(); <-ran })
	waiting := func(n int, wait string) {
		t.Helper()
		eventstest.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
			lines := logs.Lines("waiting before campaigning again")
			if len(lines) != n || !strings.Contains(lines[n-1], "wait="+wait) || !clk.HasWaiters() {
				return fmt.Errorf("%d terms; waits logged: %q", terms.Load(), lines)
			}
			return nil
		})
	}
	waiting(1, "500ms")
	if terms.Load() != 1 {
		t.Fatalf("%d terms before any time passed, want 1", terms.Load())
	}
	clk.Step(500 * time.Millisecond)
	waiting(2, "1s")
	if terms.Load() != 2 {
		t.Fatalf("%d terms after one rest, want 2", terms.Load())
	}
	clk.Step(500 * time.Millisecond)
	if terms.Load() != 2 || !clk.HasWaiters() {
		t.Fatalf("%d terms half-way through a 1s rest, want 2", terms.Load())
	}
	clk.Step(500 * time.Millisecond)
	waiting(3, "2s")
	clk.Step(2 * time.Second)
	waiting(4, "4s")
	clk.Step(4 * time.Second)
	waiting(5, "4s") // bounded by the lease duration
}
