package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Stepper runs the reactors' work items one pass at a time, for a driver
// that moves a fake clock (the simulator's World on a simulated day): the
// same feeds as Reactors.Run (events, cache changes, requeues, a periodic
// resync) mark items due, and Step runs the due ones and says when the
// next timer is. Unlike ReconcileAll it does not look at every slot on
// every pass, so a 10,000-slot pool costs what its changes cost.
type Stepper struct {
	r          *Reactors
	resync     time.Duration
	maxRequeue time.Duration

	mu  sync.Mutex
	due map[workKey]struct{}
	// timers: a requeue or a retry, by key (the soonest wins).
	timers     map[workKey]time.Time
	failures   map[workKey]int
	lastResync time.Time
	stop       func()
	// notified is the seq of the newest event the views told the Stepper
	// of: the views wake their waiters before their subscribers, so a
	// Step waits for it to reach the views' seq (see caughtUp).
	notified atomic.Uint64
	// notify is closed when notified moves (nil: nobody waits).
	notifyMu sync.Mutex
	notify   chan struct{}
	// changed is the cluster's Changed channel at the last Step.
	changed <-chan struct{}
}

// NewStepper subscribes a Stepper to the views and the cluster's object
// changes and marks every item due. resync is how often (on the reactors'
// clock) every item is marked again (default projections.ReconcilePeriod).
// A requeue a reactor asks for is cut to projections.ReconcilePeriod, as
// on the work queue (SetMaxRequeue changes that). Close unsubscribes it.
func (r *Reactors) NewStepper(resync time.Duration) *Stepper {
	if resync <= 0 {
		resync = projections.ReconcilePeriod
	}
	s := &Stepper{r: r, resync: resync, maxRequeue: projections.ReconcilePeriod, due: map[workKey]struct{}{}, timers: map[workKey]time.Time{}, failures: map[workKey]int{}, lastResync: r.clock.Now()}
	var closed sync.Once
	done := make(chan struct{})
	s.stop = func() { closed.Do(func() { close(done) }) }
	unsubscribe := r.views.Subscribe(func(e events.Event) {
		r.onEvent(s, e)
		s.notifiedUpTo(e.Seq)
	})
	s.notifiedUpTo(r.views.Seq()) // what was folded before is marked by enqueueAll below
	if ow, ok := r.cluster.(ObjectWatcher); ok {
		ow.WatchObjects(func(ch ObjectChange) {
			select {
			case <-done:
			default:
				r.onObject(s, ch)
			}
		})
	}
	s.changed = r.cluster.Changed()
	prev := s.stop
	s.stop = func() { prev(); unsubscribe() }
	r.enqueueAll(s, "", time.Time{})
	return s
}

// SetMaxRequeue sets how far off a requeue a reactor asks for may be
// before it is cut (d > 0). A driver that jumps its clock over the
// instants where nothing is due (the what-if replay) lets a requeue wait
// as long as it asked, up to its resync: cut at ReconcilePeriod, a
// reactor waiting for an hour-long deadline would be woken every 15
// seconds of the hour for nothing.
func (s *Stepper) SetMaxRequeue(d time.Duration) {
	if d > 0 {
		s.mu.Lock()
		s.maxRequeue = d
		s.mu.Unlock()
	}
}

// Close stops the Stepper's feeds.
func (s *Stepper) Close() { s.stop() }

func (s *Stepper) add(k workKey, _ time.Time) {
	s.mu.Lock()
	s.due[k] = struct{}{}
	s.mu.Unlock()
}

func (s *Stepper) notifiedUpTo(seq uint64) {
	for {
		cur := s.notified.Load()
		if seq <= cur {
			return
		}
		if s.notified.CompareAndSwap(cur, seq) {
			break
		}
	}
	s.notifyMu.Lock()
	if s.notify != nil {
		close(s.notify)
		s.notify = nil
	}
	s.notifyMu.Unlock()
}

// caughtUp waits until the views' subscribers were told of every event
// the views hold, so that what an event marks due runs at this Step and
// not at a later one by chance of the goroutines (a replay must give the
// same answer twice).
func (s *Stepper) caughtUp(ctx context.Context) error {
	giveUp := time.NewTimer(subscriberWait)
	defer giveUp.Stop()
	for {
		s.notifyMu.Lock()
		if s.notify == nil {
			s.notify = make(chan struct{})
		}
		wait := s.notify
		s.notifyMu.Unlock()
		seq := s.r.views.Seq()
		if s.notified.Load() >= seq {
			return nil
		}
		select {
		case <-wait:
		case <-giveUp.C:
			// Views replaced without their events (a restart's rebuild):
			// everything may have changed.
			s.notifiedUpTo(seq)
			s.r.enqueueAll(s, "", time.Time{})
			return nil
		case <-ctx.Done():
			return fmt.Errorf("waiting for the views' subscribers: %w", ctx.Err())
		}
	}
}

// workloadChanged marks the built-in groups' scalers due when the
// cluster's caches changed since the last Step: a pod that came or went
// tells no slot, and production's scaler sees it at its next resync
// (projections.ReconcilePeriod), which a Stepper's longer resync would
// put off by far more.
func (s *Stepper) workloadChanged() {
	select {
	case <-s.changed:
	default:
		return
	}
	s.changed = s.r.cluster.Changed()
	var groups []string
	s.r.views.Read(func(st *projections.State) {
		for name, g := range st.Groups {
			if !g.Retired && g.Spec.Scaler == events.ScalerBuiltin {
				groups = append(groups, name)
			}
		}
	})
	for _, g := range groups {
		s.add(scalerKey(g), time.Time{})
	}
}

// subscriberWait bounds how long a Step waits for the views' subscribers
// to be told of what the views hold.
const subscriberWait = time.Second

// Pending reports whether items are due now.
func (s *Stepper) Pending() bool {
	select {
	case <-s.changed:
		return true
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.due) > 0
}

// Step runs every item due now (the timers that came due and the resync
// included), once each, and returns how many ran and the time until the
// soonest timer or resync. Items marked while it runs wait for the next
// Step.
func (s *Stepper) Step(ctx context.Context) (ran int, next time.Duration, err error) {
	if err := s.caughtUp(ctx); err != nil {
		return 0, 0, err
	}
	s.workloadChanged()
	now := s.r.clock.Now()
	if now.Sub(s.lastResync) >= s.resync {
		s.lastResync = now
		s.r.enqueueAll(s, "", time.Time{})
	}
	s.mu.Lock()
	for k, at := range s.timers {
		if !at.After(now) {
			s.due[k] = struct{}{}
			delete(s.timers, k)
		}
	}
	keys := make([]workKey, 0, len(s.due))
	for k := range s.due {
		keys = append(keys, k)
	}
	clear(s.due)
	s.mu.Unlock()
	// In a fixed order (the slots by name, then the group-level items, as
	// ReconcileAll goes): one seed, one answer.
	slices.SortFunc(keys, func(a, b workKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})

	var errs []error
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return ran, 0, err
		}
		d, err := s.r.reconcileKey(ctx, k)
		ran++
		s.mu.Lock()
		switch {
		case err != nil:
			errs = append(errs, err)
			s.failures[k]++
			s.setTimer(k, now.Add(min(RetryBase<<min(s.failures[k]-1, 20), RetryMax)))
		default:
			delete(s.failures, k)
			if d > 0 {
				s.setTimer(k, now.Add(min(d, s.maxRequeue)))
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next = s.lastResync.Add(s.resync).Sub(now)
	for _, at := range s.timers {
		next = min(next, at.Sub(now))
	}
	return ran, max(next, 0), errors.Join(errs...)
}

// setTimer keeps the sooner of two timers of a key (s.mu held).
func (s *Stepper) setTimer(k workKey, at time.Time) {
	if cur, ok := s.timers[k]; !ok || at.Before(cur) {
		s.timers[k] = at
	}
}
