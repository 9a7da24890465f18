package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// ShutdownSettle is how long a machine has, after its shutdown Job
// finished, to be observed off before the next shutdown fires (a kubelet
// that stopped posting is marked NotReady after ~40s).
const ShutdownSettle = time.Minute

// Reactor is one level-based reconciler: it reads the views, the cluster's
// caches and the clock for one slot, appends what it decided (with the
// slot's expectation) and only then acts. requeueAfter > 0 asks for another
// look no later than that (a timeout is requeueAfter = time until it).
type Reactor interface {
	Name() string
	Reconcile(ctx context.Context, slot string) (requeueAfter time.Duration, err error)
}

// ReactorsConfig wires the reactors.
type ReactorsConfig struct {
	Views   *projections.Runner
	Service *Service
	Cluster Cluster
	Clock   clock.Clock
	// Namespace the lifecycle Jobs are created in (informational; the
	// cluster adapter creates them in its namespace when a request names none).
	Namespace string
	Log       *slog.Logger
	// Workers is how many work items run at once (default DefaultWorkers).
	Workers int
	// Metrics, when set, observe the work queue.
	Metrics QueueMetrics
	// Fence, when set, is asked before every change to the cluster
	// (Leadership.Prove; see Fenced).
	Fence func(context.Context) error
	// Power, when set, reads the power drivers of Node-less slots every
	// PowerEvery (default DefaultPowerWatchInterval): PowerWatch.
	Power      PowerReader
	PowerEvery time.Duration
	// PowerMetrics, when set, counts the power watch's readings.
	PowerMetrics PowerMetrics
}

// Reactors runs every reactor over every slot.
type Reactors struct {
	base
	list    []Reactor
	workers int
	metrics QueueMetrics
	queue   atomic.Pointer[workQueue]
	// watchesPower: PowerWatch is among the reactors.
	watchesPower bool
	// asked is the soonest requeue a reactor asked for in the last
	// ReconcileAll, uncapped (0: none); see Asked.
	asked atomic.Int64
}

// NewReactors builds the reactors, in the order one pass runs them on a
// slot: observe, power watch (with a PowerReader), hosts (expected host, join matching, refusal), deadline,
// boot, job monitor, job reaper, readiness gate, host loss, machine gone,
// drain then scale-down (and force shutdown), input law, node cleanup,
// collector.
// After the slots, a pass runs the group-level work: the built-in scaler
// and the refusal of stray hosts.
func NewReactors(cfg ReactorsConfig) *Reactors {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Fence != nil {
		cfg.Cluster = Fenced(cfg.Cluster, cfg.Fence)
	}
	b := base{clock: cfg.Clock, cluster: cfg.Cluster, svc: cfg.Service, views: cfg.Views, log: cfg.Log, ns: cfg.Namespace, cache: newViewCache(cfg.Views)}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	r := &Reactors{base: b, workers: cfg.Workers, metrics: cfg.Metrics}
	r.list = []Reactor{&Observer{b}}
	if cfg.Power != nil {
		r.list = append(r.list, newPowerWatch(b, cfg.Power, cfg.PowerEvery, cfg.PowerMetrics))
		r.watchesPower = true
	}
	r.list = append(r.list,
		&Hosts{base: b, silent: newSilentJobs()}, &Deadline{b}, &Boot{b}, &JobMonitor{b}, &JobReaper{b}, &ReadinessGate{b},
		&HostLoss{b}, &MachineGone{b}, &Drain{base: b, next: &ScaleDown{b}}, &InputLaw{b}, &NodeCleanup{b}, &Collector{b},
	)
	return r
}

// List returns the reactors in pass order.
func (r *Reactors) List() []Reactor { return slices.Clone(r.list) }

// ReconcileAll runs every reactor over every slot once, slots in name
// order: the synchronous pass deterministic tests drive (Run uses the
// work queue). It returns the soonest requeue any reactor asked for, bounded by
// projections.ReconcilePeriod, and every error joined (one slot's error
// does not stop the others).
func (r *Reactors) ReconcileAll(ctx context.Context) (time.Duration, error) {
	next := projections.ReconcilePeriod
	if !r.cluster.HasSynced() {
		return time.Second, nil
	}
	var slots []string
	r.views.Read(func(s *projections.State) {
		for name, sl := range s.Slots {
			if sl.Group != "" {
				slots = append(slots, name)
			}
		}
	})
	slices.Sort(slots)
	var errs []error
	var asked time.Duration
	ask := func(d time.Duration) {
		if d > 0 && (asked == 0 || d < asked) {
			asked = d
		}
	}
	defer func() { r.asked.Store(int64(asked)) }()
	for _, slot := range slots {
		if err := ctx.Err(); err != nil {
			return next, err
		}
		d, err := r.ReconcileSlot(ctx, slot)
		if err != nil {
			errs = append(errs, err)
		}
		ask(d)
		if d > 0 && d < next {
			next = d
		}
	}
	// Group-level work (builtin.go, hosts.go).
	if d, err := r.builtinScaler(ctx); err != nil {
		r.log.Error("built-in scaler failed", "err", err)
		errs = append(errs, err)
	} else {
		ask(d)
		if d > 0 && d < next {
			next = d
		}
	}
	if err := r.strayHosts(ctx); err != nil {
		errs = append(errs, err)
	}
	return next, errors.Join(errs...)
}

// Asked is the soonest requeue a reactor asked for in the last
// ReconcileAll, not capped by the resync period (0: none asked). A driver
// of a fake clock (the what-if replay) may jump to it when nothing else is
// due.
func (r *Reactors) Asked() time.Duration { return time.Duration(r.asked.Load()) }

// ReconcileSlot runs every reactor on one slot.
func (r *Reactors) ReconcileSlot(ctx context.Context, slot string) (time.Duration, error) {
	if r.idle(slot) {
		return 0, nil
	}
	var next time.Duration
	var errs []error
	for _, re := range r.list {
		d, err := re.Reconcile(ctx, slot)
		if err != nil {
			r.log.Error("reactor failed", "reactor", re.Name(), "slot", slot, "err", err)
			errs = append(errs, fmt.Errorf("%s on slot %s: %w", re.Name(), slot, err))
			continue
		}
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next, errors.Join(errs...)
}

// idle: nothing any reactor could act on (no claim in the views, no Node
// observed or cached, no finished lifecycle Job the job reaper deletes).
func (r *Reactors) idle(slot string) bool {
	idle, node, reaps := false, slot, false
	r.views.Read(func(s *projections.State) {
		sl := s.Slots[slot]
		// A machine its power driver read on, or one the power watch
		// reads, has work without a claim or a Node.
		idle = sl != nil && len(sl.Claims) == 0 && !sl.Node.Present && !sl.SeenOnByDriver() &&
			!(r.watchesPower && specPower(sl.Spec) != nil)
		if sl != nil {
			node = sl.NodeName()
			reaps = hasTTL(sl.Spec.Startup) || hasTTL(sl.Spec.Shutdown)
		}
	})
	if !idle {
		return false
	}
	if _, present := r.cluster.Node(node); present {
		return false
	}
	return !reaps || len(r.cluster.SlotJobs(slot)) == 0
}

func hasTTL(j *events.JobSpec) bool { return j != nil && j.TTLSecondsAfterFinished != nil }

// Run reconciles until ctx ends, from the work queue (queue.go): each
// event, cache change and timer enqueues the slots it concerns; every
// ReconcilePeriod everything is enqueued again.
func (r *Reactors) Run(ctx context.Context) error {
	for !r.cluster.HasSynced() {
		t := r.clock.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
	return r.runQueue(ctx)
}
