package handlers

import (
	"context"
	"errors"
	"sync"
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
	r      *Reactors
	resync time.Duration

	mu  sync.Mutex
	due map[workKey]struct{}
	// timers: a requeue or a retry, by key (the soonest wins).
	timers     map[workKey]time.Time
	failures   map[workKey]int
	lastResync time.Time
	stop       func()
}

// NewStepper subscribes a Stepper to the views and the cluster's object
// changes and marks every item due. resync is how often (on the reactors'
// clock) every item is marked again (default projections.ReconcilePeriod).
// Close unsubscribes it.
func (r *Reactors) NewStepper(resync time.Duration) *Stepper {
	if resync <= 0 {
		resync = projections.ReconcilePeriod
	}
	s := &Stepper{r: r, resync: resync, due: map[workKey]struct{}{}, timers: map[workKey]time.Time{}, failures: map[workKey]int{}, lastResync: r.clock.Now()}
	var closed sync.Once
	done := make(chan struct{})
	s.stop = func() { closed.Do(func() { close(done) }) }
	unsubscribe := r.views.Subscribe(func(e events.Event) { r.onEvent(s, e) })
	if ow, ok := r.cluster.(ObjectWatcher); ok {
		ow.WatchObjects(func(ch ObjectChange) {
			select {
			case <-done:
			default:
				r.onObject(s, ch)
			}
		})
	}
	prev := s.stop
	s.stop = func() { prev(); unsubscribe() }
	r.enqueueAll(s, "", time.Time{})
	return s
}

// Close stops the Stepper's feeds.
func (s *Stepper) Close() { s.stop() }

func (s *Stepper) add(k workKey, _ time.Time) {
	s.mu.Lock()
	s.due[k] = struct{}{}
	s.mu.Unlock()
}

// Pending reports whether items are due now.
func (s *Stepper) Pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.due) > 0
}

// Step runs every item due now (the timers that came due and the resync
// included), once each, and returns how many ran and the time until the
// soonest timer or resync. Items marked while it runs wait for the next
// Step.
func (s *Stepper) Step(ctx context.Context) (ran int, next time.Duration, err error) {
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
				s.setTimer(k, now.Add(min(d, projections.ReconcilePeriod)))
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
