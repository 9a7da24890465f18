package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// Lease is what the leadership needs of an elector (handlers/leader):
// whether this replica holds a lease valid by its own clock, and its name.
type Lease interface {
	Leading() bool
	Identity() string
}

// Leadership is this replica's standing among the replicas: the epoch it
// leads (0: none), the write gate the command service consults before
// every append, and the proof the reactors ask for before every side
// effect.
type Leadership struct {
	lease Lease
	store *eventlog.Store
	views *projections.Runner
	clock clock.PassiveClock
	log   *slog.Logger

	// Source is the CloudEvents source of LeaderElected (serve's
	// --event-source, so two installations' events differ).
	Source string

	mu    sync.Mutex
	epoch uint64
	// fence is the seq of this term's LeaderElected: every append of the
	// term is fenced by it (eventlog.Fenced), so the log refuses it once a
	// newer leader is elected.
	fence   uint64
	deposed func(why string)
	// led is the last epoch this process was elected for (kept on step
	// down): a refusal tells a stepped-down leader from a restarted one.
	led uint64
}

// NewLeadership returns the leadership of the replica that lease names.
func NewLeadership(lease Lease, store *eventlog.Store, views *projections.Runner, clk clock.PassiveClock, log *slog.Logger) *Leadership {
	if log == nil {
		log = slog.Default()
	}
	return &Leadership{lease: lease, store: store, views: views, clock: clk, log: log, Source: "/claimstream/leader"}
}

// ErrDeposed: this replica no longer leads; it must not write or act.
var ErrDeposed = errors.New("deposed")

// Elect appends LeaderElected for the epoch after the last one the views
// hold, with the leadership aggregate's expectation, so two replicas
// cannot both win one epoch; it returns once the views include it, so the
// new leader decides on everything the old one appended. deposed is
// called (once) if this term is found deposed later.
func (l *Leadership) Elect(ctx context.Context, grpcAddress, apiAddress, cause string, deposed func(why string)) (uint64, error) {
	for range 10 {
		if !l.lease.Leading() {
			return 0, fmt.Errorf("elect: %w: the lease lapsed before LeaderElected was appended", ErrDeposed)
		}
		// Everything appended so far, the last leader's included.
		last, err := l.store.LastSeq(ctx)
		if err != nil {
			return 0, fmt.Errorf("elect: %w", err)
		}
		if err := l.views.WaitFor(ctx, last); err != nil {
			return 0, fmt.Errorf("elect: %w", err)
		}
		var cur projections.Leader
		l.views.Read(func(st *projections.State) { cur = st.CurrentLeader() })
		epoch := cur.Epoch + 1
		ev := events.Event{Source: l.Source, Time: l.clock.Now().UTC(), Epoch: epoch, Data: events.LeaderElected{
			Replica: l.lease.Identity(), Epoch: epoch, GRPCAddress: grpcAddress, APIAddress: apiAddress, Cause: cause,
		}}
		res, err := l.store.Append(ctx, events.Leadership(), cur.Seq, ev)
		if errors.Is(err, eventlog.ErrConflict) {
			continue // another replica appended first: look again
		}
		if err != nil {
			return 0, fmt.Errorf("elect: append LeaderElected epoch %d: %w", epoch, err)
		}
		if err := l.views.WaitFor(ctx, res.Last); err != nil {
			return 0, fmt.Errorf("elect: %w", err)
		}
		l.mu.Lock()
		l.epoch, l.fence, l.deposed, l.led = epoch, res.Last, deposed, epoch
		l.mu.Unlock()
		l.log.Info("leader elected", "replica", l.lease.Identity(), "epoch", epoch, "seq", res.Last)
		return epoch, nil
	}
	return 0, fmt.Errorf("elect: LeaderElected kept conflicting with other replicas' appends")
}

// StepDown ends this replica's epoch: every later append is refused.
func (l *Leadership) StepDown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch, l.fence, l.deposed = 0, 0, nil
}

// Fence is the epoch this replica leads and the seq of its LeaderElected,
// which fences the term's appends (0, 0: none).
func (l *Leadership) Fence() (epoch, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, l.fence
}

// Fenced is told that the log refused an append of this term: a newer
// leader was elected. It steps down as Prove does, at once.
func (l *Leadership) Fenced(why string) {
	l.mu.Lock()
	epoch, deposed := l.epoch, l.deposed
	l.mu.Unlock()
	if epoch == 0 {
		return
	}
	l.log.Warn("deposed: the log refused this leader's write", "replica", l.lease.Identity(), "epoch", epoch, "why", why)
	l.StepDown()
	if deposed != nil {
		deposed(why)
	}
}

// Epoch is the epoch this replica leads (0: none).
func (l *Leadership) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// Leads reports whether this replica leads now: an epoch of its own, a
// lease valid by its own clock, and no later epoch in the views.
func (l *Leadership) Leads() bool { _, err := l.Permit(); return err == nil }

// Permit is the write gate: the epoch to stamp on an append, or an
// Unavailable refusal that names the leader and its address.
func (l *Leadership) Permit() (uint64, error) {
	epoch := l.Epoch()
	var cur projections.Leader
	l.views.Read(func(st *projections.State) { cur = st.CurrentLeader() })
	if epoch != 0 && l.lease.Leading() && cur.Epoch == epoch && cur.Replica == l.lease.Identity() {
		return epoch, nil
	}
	return 0, l.notLeader(cur)
}

func (l *Leadership) notLeader(cur projections.Leader) error {
	l.mu.Lock()
	epoch, led := l.epoch, l.led
	l.mu.Unlock()
	switch {
	case cur.Replica == "":
		return decide.Refuse(decide.CodeUnavailable, "not the leader: no replica has been elected yet; retry shortly")
	case cur.Replica == l.lease.Identity() && epoch == 0:
		// The log's last leader is this replica, which leads no epoch now.
		switch {
		case l.lease.Leading():
			return decide.Refuse(decide.CodeUnavailable, "not the leader yet: this replica led epoch %d, holds the lease again and is electing itself for the next epoch; retry shortly", cur.Epoch)
		case led == cur.Epoch:
			return decide.Refuse(decide.CodeUnavailable, "not the leader: this replica led epoch %d, stepped down and has not re-established its lease; no other replica has been elected since; retry shortly", cur.Epoch)
		}
		return decide.Refuse(decide.CodeUnavailable, "not the leader: this replica led epoch %d before it restarted and has not re-established its lease; no other replica has been elected since; retry shortly", cur.Epoch)
	case cur.Replica == l.lease.Identity():
		return decide.Refuse(decide.CodeUnavailable, "not the leader: this replica's lease lapsed (it led epoch %d); retry shortly, a leader is being elected", cur.Epoch)
	}
	return decide.Refuse(decide.CodeUnavailable, "not the leader: %s (%s) leads epoch %d; send writes to it", cur.Replica, leaderAddress(cur), cur.Epoch)
}

func leaderAddress(cur projections.Leader) string {
	switch {
	case cur.GRPCAddress != "" && cur.APIAddress != "":
		return "provider " + cur.GRPCAddress + ", API " + cur.APIAddress
	case cur.GRPCAddress != "":
		return cur.GRPCAddress
	case cur.APIAddress != "":
		return cur.APIAddress
	}
	return "address unknown"
}

// Prove is asked just before a side effect: the last event of the
// leadership aggregate, read through the stream leader, must still be this
// replica's own LeaderElected, and the lease valid. Otherwise it logs
// "deposed: not acting", steps down and returns ErrDeposed.
func (l *Leadership) Prove(ctx context.Context) error {
	l.mu.Lock()
	epoch, deposed := l.epoch, l.deposed
	l.mu.Unlock()
	why := ""
	switch {
	case epoch == 0:
		why = "this replica leads no epoch"
	case !l.lease.Leading():
		why = "the lease lapsed"
	default:
		e, err := l.store.LastFromLeader(ctx, events.Leadership())
		if err != nil {
			// Unproven is not deposed: do not act now, try again later.
			return fmt.Errorf("leadership not proven: %w", err)
		}
		d, ok := e.Data.(events.LeaderElected)
		switch {
		case !ok:
			why = fmt.Sprintf("the leadership's last event (seq %d) is unreadable", e.Seq)
		case d.Replica != l.lease.Identity() || d.Epoch != epoch:
			why = fmt.Sprintf("%s leads epoch %d (this replica led epoch %d)", d.Replica, d.Epoch, epoch)
		default:
			return nil
		}
	}
	if epoch != 0 {
		l.log.Warn("deposed: not acting", "replica", l.lease.Identity(), "epoch", epoch, "why", why)
		l.StepDown()
		if deposed != nil {
			deposed(why)
		}
	}
	return fmt.Errorf("%w: %s", ErrDeposed, why)
}
