// Package leader elects one leader among the replicas of serve: a
// Kubernetes Lease in a cluster, a JetStream key-value lease without one.
// Both implement Elector; what the leader does (append LeaderElected, run
// the leader-only work) is the caller's.
package leader

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Elector takes part in the election of one leader among the replicas.
type Elector interface {
	// Run campaigns until ctx ends. Each time this replica wins, it calls
	// lead with a context that is cancelled when leadership is lost, waits
	// for lead to return, and campaigns again: a deposed leader becomes a
	// follower, it does not exit.
	Run(ctx context.Context, lead func(ctx context.Context))
	// Leading reports whether this replica holds a lease that is valid now
	// by its own monotonic clock: renewed less than the renew deadline ago.
	// A process stopped (SIGSTOP) past that reads false when it resumes,
	// before it has had a chance to renew.
	Leading() bool
	// Leader is the holder this replica last observed (zero: none known).
	Leader() Holder
	// Identity is this replica's name in the election.
	Identity() string
}

// Holder is a replica that holds the lease, with the addresses its
// provider and REST API answer on.
type Holder struct {
	Replica     string `json:"replica"`
	GRPCAddress string `json:"grpcAddress,omitempty"`
	APIAddress  string `json:"apiAddress,omitempty"`
}

// Timing is the lease's timing, as client-go's leader election has it.
type Timing struct {
	// LeaseDuration: how long another replica waits, on its own clock,
	// after it last saw the lease change before it takes the lease.
	LeaseDuration time.Duration
	// RenewDeadline: the holder is leader only while its last renewal is
	// younger than this (< LeaseDuration).
	RenewDeadline time.Duration
	// RetryPeriod: how often the holder renews and the others look.
	RetryPeriod time.Duration
}

// DefaultTiming is short: the log fences every append by its leader's
// LeaderElected (eventlog.Fenced), so two replicas that both believe they
// lead cannot both write, and a short lease only makes a failover fast.
var DefaultTiming = Timing{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}

func (t Timing) withDefaults() Timing {
	if t.LeaseDuration <= 0 {
		t.LeaseDuration = DefaultTiming.LeaseDuration
	}
	if t.RenewDeadline <= 0 || t.RenewDeadline >= t.LeaseDuration {
		t.RenewDeadline = t.LeaseDuration * 2 / 3
	}
	if t.RetryPeriod <= 0 || t.RetryPeriod >= t.RenewDeadline {
		t.RetryPeriod = t.RenewDeadline / 5
	}
	return t
}

// term is the bookkeeping both electors share: whether this replica leads,
// when it last renewed (on its own clock), whom it follows, and the one
// log line per change.
type term struct {
	clock    clock.PassiveClock
	deadline time.Duration
	log      *slog.Logger
	self     string
	// timing bounds the rest after a short term (lead).
	timing Timing
	// rest is how long to wait before the next campaign: after terms
	// whose work ended by itself sooner than the lease duration (a
	// replica that cannot lead yet), RetryPeriod, doubling up to
	// LeaseDuration; 0 after a term that lasted.
	rest time.Duration

	mu        sync.Mutex
	leading   bool
	renewedAt time.Time
	leader    Holder
}

// renewed records a renewal that started at began (the start, not the
// end, of the write: the lease counts from before it was written).
func (t *term) renewed(began time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.renewedAt = began
}

func (t *term) valid() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leading && t.clock.Since(t.renewedAt) < t.deadline
}

// expired reports whether the last renewal is older than the renew
// deadline: leadership is lost.
func (t *term) expired() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clock.Since(t.renewedAt) >= t.deadline
}

func (t *term) observed(h Holder) {
	t.mu.Lock()
	changed := h.Replica != t.leader.Replica
	t.leader = h
	t.mu.Unlock()
	if changed && h.Replica != "" && h.Replica != t.self {
		t.log.Info("following "+h.Replica, "leader", h.Replica, "grpc", h.GRPCAddress, "api", h.APIAddress)
	}
}

func (t *term) current() Holder {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leader
}

// pause waits out the rest lead set after a short term, so that a replica
// whose work fails at once (its views cannot catch up yet, the log refuses
// its election) does not take, fail and release the lease many times a
// second, and the others get their turn.
func (t *term) pause(ctx context.Context, clk clock.Clock) {
	t.mu.Lock()
	d := t.rest
	t.mu.Unlock()
	if d == 0 || ctx.Err() != nil {
		return
	}
	t.log.Info("the leader's work ended soon after it began; waiting before campaigning again", "replica", t.self, "wait", d)
	select {
	case <-ctx.Done():
	case <-clk.After(d):
	}
}

// lead runs one term: lead(ctx) in its own goroutine with a context that
// lost cancels; it returns once lead has returned, having logged why the
// term ended.
func (t *term) lead(ctx context.Context, lead func(context.Context), lost <-chan string) {
	t.mu.Lock()
	t.leading = true
	t.mu.Unlock()
	t.log.Info("leading", "replica", t.self)
	began := t.clock.Now()
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(tctx)
	}()
	var why string
	ended := false
	select {
	case why = <-lost:
	case <-done:
		why, ended = "the leader's work ended", true
	case <-ctx.Done():
		why = "stopping"
	}
	t.mu.Lock()
	t.leading = false
	switch {
	case ended && t.clock.Since(began) < t.timing.LeaseDuration:
		t.rest = min(max(2*t.rest, t.timing.RetryPeriod), t.timing.LeaseDuration)
	default:
		t.rest = 0
	}
	t.mu.Unlock()
	cancel()
	<-done
	if ctx.Err() == nil {
		t.log.Warn("lost leadership: "+why, "replica", t.self)
	}
}
