package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// serve's shutdown has one budget, --shutdown-timeout, that fits inside
// the pod's termination grace period: past it the kubelet kills the
// process whatever it was doing. Its steps share the budget in order, each
// by its weight among the steps still to come, so time one step leaves
// goes to the later ones and a step that overruns its share takes nothing
// from the steps after it beyond that share. One that overruns is logged
// with what it still waits for, and the shutdown goes on.
const defaultShutdownTimeout = 25 * time.Second

// The steps of the shutdown, in order.
const (
	// stepHandOver: the leader ends its term and releases the lease, so a
	// follower takes over while this replica still drains its requests.
	stepHandOver = "leader hand-over"
	// stepIntake: the provider and the REST API give requests in flight
	// a moment, then close.
	stepIntake = "intake"
	// stepWork: the reactors and the webhook sinks finish what they have
	// in flight (a delivery, its ack).
	stepWork = "reactors and sinks"
	// stepViews: the views and the log's monitor stop.
	stepViews = "views"
	// stepNATS: the embedded NATS server and the log close.
	stepNATS = "NATS"
	// stepTelemetry: telemetry's flush.
	stepTelemetry = "telemetry"
)

// shutdownStep is a step of the shutdown and its weight: its share of
// what is left of the budget, against the steps after it.
type shutdownStep struct {
	name   string
	weight int
}

var shutdownSteps = []shutdownStep{{stepHandOver, 2}, {stepIntake, 3}, {stepWork, 5}, {stepViews, 1}, {stepNATS, 2}, {stepTelemetry, 1}}

// shutdownBudget times serve's shutdown; it begins at the first step asked
// for.
type shutdownBudget struct {
	total time.Duration

	mu  sync.Mutex
	end time.Time // zero until the shutdown begins
}

func newShutdownBudget(total time.Duration) *shutdownBudget {
	if total <= 0 {
		total = defaultShutdownTimeout
	}
	return &shutdownBudget{total: total}
}

// grace is step's deadline on clk: its share of what is left of the
// budget, weighed against the steps after it.
func (b *shutdownBudget) grace(clk clock.PassiveClock, step string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := clk.Now()
	if b.end.IsZero() {
		b.end = now.Add(b.total)
	}
	left := b.end.Sub(now)
	if left <= 0 {
		return 0
	}
	i := slices.IndexFunc(shutdownSteps, func(s shutdownStep) bool { return s.name == step })
	if i < 0 {
		return left
	}
	rest := 0
	for _, s := range shutdownSteps[i:] {
		rest += s.weight
	}
	return left * time.Duration(shutdownSteps[i].weight) / time.Duration(rest)
}

// closeWithin runs the last steps' close fn and waits at most grace (on
// clk) for it; past that the shutdown goes on without it, and the step is
// named in the log.
func closeWithin(clk clock.Clock, log *slog.Logger, step string, grace time.Duration, fn func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	start := clk.Now()
	select {
	case <-done:
		log.Info("stopped", "stage", step, "took", clk.Since(start).Round(time.Millisecond))
		return true
	case <-clk.After(grace):
		log.Error("shutdown stage overran its deadline; going on without it", "stage", step, "deadline", grace.Round(time.Millisecond), "waiting_for", step)
		return false
	}
}

// stopServe stops serve's stages in order, each within its deadline
// (once; later calls wait for nothing): the leader steps down first, so
// that its lease is handed over while the intake drains; then the intake,
// the reactors and sinks, the views.
func stopServe(run *lifecycle, intake, work, views *stage) {
	run.stopOnce.Do(func() {
		if run.stepDown != nil {
			run.stepDown()
			run.waitHandOver()
		}
		intake.stopWithin(run.clock, run.budget.grace(run.clock, stepIntake))
		work.stopWithin(run.clock, run.budget.grace(run.clock, stepWork))
		views.stopWithin(run.clock, run.budget.grace(run.clock, stepViews))
	})
}

// waitHandOver waits, within its share of the budget, for the leadership
// to end (handedOver closed): its lease released before the intake stops.
func (l *lifecycle) waitHandOver() {
	if l.handedOver == nil {
		return
	}
	grace := l.budget.grace(l.clock, stepHandOver)
	start := l.clock.Now()
	select {
	case <-l.handedOver:
		l.log.Info("stopped", "stage", stepHandOver, "took", l.clock.Since(start).Round(time.Millisecond))
	case <-l.clock.After(grace):
		l.log.Error("shutdown stage overran its deadline; going on without it", "stage", stepHandOver, "deadline", grace.Round(time.Millisecond), "waiting_for", "leadership")
	}
}

// lifecycle runs serve's goroutines in stages that are stopped in order:
// each stage's context is canceled, then its goroutines are waited for.
// Every goroutine's error is kept; the first one trips the whole process
// into shutdown.
type lifecycle struct {
	log *slog.Logger
	// clock times the stages' deadlines at stop.
	clock clock.Clock

	tripped  chan struct{} // closed by the first failing goroutine
	tripOnce sync.Once
	stopOnce sync.Once
	// stepDown, when set, ends this replica's leadership (its term's work
	// stops, then the lease is released) at the start of the stop;
	// handedOver is closed once it has ended.
	stepDown   func()
	handedOver <-chan struct{}
	// budget shares --shutdown-timeout among the steps of the stop.
	budget *shutdownBudget

	mu   sync.Mutex
	errs []error
}

func newLifecycle(log *slog.Logger) *lifecycle {
	return &lifecycle{log: log, clock: clock.RealClock{}, tripped: make(chan struct{}), budget: newShutdownBudget(defaultShutdownTimeout)}
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

	mu      sync.Mutex
	running map[string]int // parts by name, while their fn runs
}

// stage starts a stage whose context ends with parent or when it is
// stopped.
func (l *lifecycle) stage(parent context.Context, name string) *stage {
	ctx, cancel := context.WithCancel(parent)
	return &stage{l: l, name: name, ctx: ctx, cancel: cancel, running: map[string]int{}}
}

// Go runs fn in the stage; what names it in errors.
func (s *stage) Go(what string, fn func(context.Context) error) {
	s.wg.Add(1)
	s.mu.Lock()
	s.running[what]++
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			if s.running[what]--; s.running[what] == 0 {
				delete(s.running, what)
			}
			s.mu.Unlock()
		}()
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

// stopWithin cancels the stage and waits at most grace (on clk) for its
// goroutines; it reports whether they all returned. Past the deadline the
// rest of the shutdown goes on, and the parts still running are named in
// the log.
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
		s.l.log.Error("shutdown stage overran its deadline; going on without it", "stage", s.name, "deadline", grace.Round(time.Millisecond), "waiting_for", s.stillRunning())
		return false
	}
}

// stillRunning names the stage's parts whose fn has not returned, sorted.
func (s *stage) stillRunning() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.running))
	for n := range s.running {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
