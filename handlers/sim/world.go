package sim

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/projections"
)

// WorldConfig builds a World: the command service and the views of a
// running claimstream, and a simulated cluster for its reactors.
type WorldConfig struct {
	Views     *projections.Runner
	Service   *handlers.Service
	Clock     clock.Clock
	Namespace string
	Seed      int64
	Timing    Timing
	Log       *slog.Logger
	// WatchDelay is how far the informers lag the writes on the world's
	// clock (kube.FakeOptions.WatchDelay: 0 the default lag, negative
	// none).
	WatchDelay time.Duration
	// Metrics, when set, observe the reactors' work queue.
	Metrics handlers.QueueMetrics
	// Fence, when set, is asked before the reactors change the cluster
	// (handlers.ReactorsConfig.Fence).
	Fence func(context.Context) error
	// Stepped: RunFor and RunUntil run only the work items that are due
	// (handlers.Stepper: events, cache changes, requeues and a resync every
	// Resync) instead of every reactor on every slot at each pass, so a
	// 10,000-slot pool costs what its changes cost.
	Stepped bool
	// Resync is a Stepped world's full resync period on its clock
	// (default projections.ReconcilePeriod).
	Resync time.Duration
	// MaxRequeue, when set, is how far off a requeue a reactor asks for
	// may be in a Stepped world (default projections.ReconcilePeriod, as
	// on the work queue; handlers.Stepper.SetMaxRequeue).
	MaxRequeue time.Duration
}

// World is a simulated cluster (fake clientset + machines) under the
// production kube adapter and reactors.
type World struct {
	cfg      WorldConfig
	Fake     *kube.Fake
	Sim      *Sim
	Cluster  *kube.Cluster
	Reactors *handlers.Reactors

	cancel  context.CancelFunc
	stepper *handlers.Stepper
	// Passes and ItemsRun count the reactors' passes of RunFor and
	// RunUntil and, in a Stepped world, the work items they ran.
	Passes, ItemsRun int
}

// NewWorld builds the world; Start runs its informers.
func NewWorld(cfg WorldConfig) *World {
	if cfg.Namespace == "" {
		cfg.Namespace = "claimstream"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	// The informers lag the writes on the world's clock; the simulator
	// removes finished Jobs itself (Timing.FinishedJobTTL).
	w := &World{cfg: cfg, Fake: kube.NewFakeWith(kube.FakeOptions{Clock: cfg.Clock, NoTTLController: true, WatchDelay: cfg.WatchDelay})}
	w.Sim = New(Config{Fake: w.Fake, Namespace: cfg.Namespace, Clock: cfg.Clock, Views: cfg.Views, Seed: cfg.Seed, Timing: cfg.Timing})
	return w
}

// Start builds the cluster adapter and the reactors over the fake
// clientset and waits for the caches.
func (w *World) Start(ctx context.Context) error {
	ictx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	// The simulator runs no image: a power driver's Job needs one named.
	w.Cluster = w.Fake.NewCluster(kube.Options{Namespace: w.cfg.Namespace, Clock: w.cfg.Clock, PowerImage: "claimstream:simulated"})
	w.Cluster.Start(ictx)
	if !w.Cluster.WaitForSync(ictx) {
		cancel()
		return fmt.Errorf("simulated cluster: caches did not sync")
	}
	w.Reactors = handlers.NewReactors(handlers.ReactorsConfig{
		Views: w.cfg.Views, Service: w.cfg.Service, Cluster: w.Cluster, Clock: w.cfg.Clock, Namespace: w.cfg.Namespace, Log: w.cfg.Log, Metrics: w.cfg.Metrics, Fence: w.cfg.Fence,
	})
	return nil
}

// Stop stops the informers.
func (w *World) Stop() {
	if w.cancel != nil {
		w.cancel()
		w.Cluster.Shutdown()
		w.cancel = nil
	}
	if w.stepper != nil {
		w.stepper.Close()
		w.stepper = nil
	}
}

// Restart is a process restart: new views and service (the caller rebuilt
// them on the same store), a new cluster adapter and new reactors over the
// same fake cluster and the same machines.
func (w *World) Restart(ctx context.Context, views *projections.Runner, svc *handlers.Service) error {
	w.Stop()
	w.cfg.Views, w.cfg.Service = views, svc
	w.Sim.SetViews(views)
	return w.Start(ctx)
}

// Service is the command service the world's reactors use.
func (w *World) Service() *handlers.Service { return w.cfg.Service }

// Settle lets the caches catch up with every write.
func (w *World) Settle(ctx context.Context) error { return w.Cluster.Settle(ctx) }

// Pass runs the simulator and the reactors at the current instant until
// neither has anything left to do now (bounded), and returns the soonest
// requeue the reactors asked for.
func (w *World) Pass(ctx context.Context) (time.Duration, error) {
	next := projections.ReconcilePeriod
	for i := 0; i < 50; i++ {
		ran, err := w.Sim.Step(ctx)
		if err != nil {
			return 0, fmt.Errorf("simulator: %w", err)
		}
		if err := w.Settle(ctx); err != nil {
			return 0, err
		}
		seq := w.cfg.Views.Seq()
		d, err := w.reconcile(ctx)
		if err != nil {
			return 0, err
		}
		next = d
		if err := w.Settle(ctx); err != nil {
			return 0, err
		}
		if ran == 0 && w.cfg.Views.Seq() == seq && (w.stepper == nil || !w.stepper.Pending()) {
			at, ok := w.Sim.NextAt()
			if !ok || at.After(w.cfg.Clock.Now()) {
				return next, nil
			}
		}
	}
	return next, nil
}

// reconcile is one pass of the reactors: every slot, or a Stepped world's
// due items (a failed item is retried after its backoff, as on the work
// queue, and does not stop the pass).
func (w *World) reconcile(ctx context.Context) (time.Duration, error) {
	w.Passes++
	if !w.cfg.Stepped {
		return w.Reactors.ReconcileAll(ctx)
	}
	if w.stepper == nil {
		w.stepper = w.Reactors.NewStepper(w.cfg.Resync)
		w.stepper.SetMaxRequeue(w.cfg.MaxRequeue)
	}
	ran, next, err := w.stepper.Step(ctx)
	w.ItemsRun += ran
	if err != nil && ctx.Err() == nil {
		w.cfg.Log.Warn("work items failed, retrying them after a backoff", "err", err)
	}
	return next, ctx.Err()
}

// RunFor drives a fake clock: a pass, then a jump to the soonest of the
// reactors' requeue and the simulator's next action, until d has passed.
func (w *World) RunFor(ctx context.Context, d time.Duration) error {
	_, err := w.RunUntil(ctx, d, nil)
	return err
}

// RunUntil runs like RunFor until cond holds on the views (checked after
// every pass; nil never holds) or max has passed; it reports whether cond
// held.
func (w *World) RunUntil(ctx context.Context, max time.Duration, cond func(*projections.State) bool) (bool, error) {
	fc, ok := w.cfg.Clock.(*clocktesting.FakeClock)
	if !ok {
		return false, fmt.Errorf("RunFor/RunUntil need a *testing.FakeClock, got %T", w.cfg.Clock)
	}
	end := fc.Now().Add(max)
	for {
		next, err := w.Pass(ctx)
		if err != nil {
			return false, err
		}
		if cond != nil {
			held := false
			w.cfg.Views.Read(func(s *projections.State) { held = cond(s) })
			if held {
				return true, nil
			}
		}
		now := fc.Now()
		if !now.Before(end) {
			return false, nil
		}
		at := now.Add(next)
		if s, ok := w.Sim.NextAt(); ok && s.Before(at) {
			at = s
		}
		if !at.After(now) {
			at = now.Add(time.Millisecond)
		}
		if at.After(end) {
			at = end
		}
		fc.SetTime(at)
	}
}

// Run drives the world on a real (or scaled) clock until ctx ends: the
// simulator's actions at their times, the reactors on their work queue
// (Reactors.Run). This is what `serve` runs with no kubeconfig.
func (w *World) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- w.Reactors.Run(ctx) }()
	for {
		if _, err := w.Sim.Step(ctx); err != nil {
			w.cfg.Log.Error("simulator step", "err", err)
		}
		wait := time.Second
		if at, ok := w.Sim.NextAt(); ok {
			if d := at.Sub(w.cfg.Clock.Now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		t := w.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return <-errc
		case <-w.Sim.Notify():
		case <-t.C():
		}
		t.Stop()
	}
}
