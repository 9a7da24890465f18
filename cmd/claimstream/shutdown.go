package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// shutdownGrace bounds the wait for the reactors and the webhook sinks to
// finish what they have in flight (a delivery, its ack) at shutdown.
const shutdownGrace = 30 * time.Second

// stopServe stops serve's stages in order (once; later calls wait for
// nothing): intake, then the reactors and sinks within shutdownGrace,
// then the views.
func stopServe(run *lifecycle, intake, work, views *stage) {
	run.stopOnce.Do(func() {
		intake.stop()
		work.stopWithin(clock.RealClock{}, shutdownGrace)
		views.stop()
	})
}

// lifecycle runs serve's goroutines in stages that are stopped in order:
// each stage's context is canceled, then its goroutines are waited for.
// Every goroutine's error is kept; the first one trips the whole process
// into shutdown.
type lifecycle struct {
	log *slog.Logger

	tripped  chan struct{} // closed by the first failing goroutine
	tripOnce sync.Once
	stopOnce sync.Once

	mu   sync.Mutex
	errs []error
}

func newLifecycle(log *slog.Logger) *lifecycle {
	return &lifecycle{log: log, tripped: make(chan struct{})}
}

// failed is closed when a goroutine of any stage returned an error.
func (l *lifecycle) failed() <-chan struct{} { return l.tripped }

// err joins every error the goroutines returned.
func (l *lifecycle) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

// stage is a set of goroutines stopped together.
type stage struct {
	l      *lifecycle
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stage starts a stage whose context ends with parent or when it is
// stopped.
func (l *lifecycle) stage(parent context.Context, name string) *stage {
	ctx, cancel := context.WithCancel(parent)
	return &stage{l: l, name: name, ctx: ctx, cancel: cancel}
}

// Go runs fn in the stage; what names it in errors.
func (s *stage) Go(what string, fn func(context.Context) error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := fn(s.ctx)
		switch {
		case err == nil:
			return
		case s.ctx.Err() != nil:
			// Stopping: an error now (a start cut short) is no failure
			// of the process, but it is told.
			if !errors.Is(err, context.Canceled) {
				s.l.log.Warn("stopped with an error", "stage", s.name, "part", what, "err", err)
			}
			return
		}
		s.l.mu.Lock()
		s.l.errs = append(s.l.errs, fmt.Errorf("%s: %w", what, err))
		s.l.mu.Unlock()
		s.l.tripOnce.Do(func() { close(s.l.tripped) })
	}()
}

// stop cancels the stage and waits for its goroutines.
func (s *stage) stop() {
	s.cancel()
	s.wg.Wait()
	s.l.log.Info("stopped", "stage", s.name)
}

// stopWithin cancels the stage and waits at most grace (on clk) for its
// goroutines; it reports whether they all returned. Past the grace period
// the rest of the shutdown goes on and the stragglers are named in the log.
func (s *stage) stopWithin(clk clock.Clock, grace time.Duration) bool {
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	start := clk.Now()
	select {
	case <-done:
		s.l.log.Info("stopped", "stage", s.name, "took", clk.Since(start).Round(time.Millisecond))
		return true
	case <-clk.After(grace):
		s.l.log.Error("shutdown grace period over; stopping with work in flight", "stage", s.name, "grace", grace)
		return false
	}
}
