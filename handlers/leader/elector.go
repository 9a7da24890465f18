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

// DefaultTiming is client-go's usual 15s/10s/2s.
var DefaultTiming = Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

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

// lead runs one term: lead(ctx) in its own goroutine with a context that
// lost cancels; it returns once lead has returned, having logged why the
// term ended.
func (t *term) lead(ctx context.Context, lead func(context.Context), lost <-chan string) {
	t.mu.Lock()
	t.leading = true
	t.mu.Unlock()
	t.log.Info("leading", "replica", t.self)
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(tctx)
	}()
	var why string
	select {
	case why = <-lost:
	case <-done:
		why = "the leader's work ended"
	case <-ctx.Done():
		why = "stopping"
	}
	t.mu.Lock()
	t.leading = false
	t.mu.Unlock()
	cancel()
	<-done
	if ctx.Err() == nil {
		t.log.Warn("lost leadership: "+why, "replica", t.self)
	}
}
