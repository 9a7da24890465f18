package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
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
}

// Reactors runs every reactor over every slot.
type Reactors struct {
	base
	list    []Reactor
	workers int
	metrics QueueMetrics
	queue   atomic.Pointer[workQueue]
	// asked is the soonest requeue a reactor asked for in the last
	// ReconcileAll, uncapped (0: none); see Asked.
	asked atomic.Int64
}

// NewReactors builds the reactors, in the order one pass runs them on a
// slot: observe, hosts (expected host, join matching, refusal), deadline,
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
	r.list = []Reactor{
		&Observer{b}, &Hosts{base: b, silent: newSilentJobs()}, &Deadline{b}, &Boot{b}, &JobMonitor{b}, &JobReaper{b}, &ReadinessGate{b},
		&HostLoss{b}, &MachineGone{b}, &Drain{base: b, next: &ScaleDown{b}}, &InputLaw{b}, &NodeCleanup{b}, &Collector{b},
	}
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
		idle = sl != nil && len(sl.Claims) == 0 && !sl.Node.Present
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

// --- what every reactor shares ---------------------------------------------

type base struct {
	clock   clock.Clock
	cluster Cluster
	svc     *Service
	views   *projections.Runner
	log     *slog.Logger
	ns      string
	// cache shares one view of a slot between the reactors of a pass
	// (viewcache.go); nil builds a view on every read.
	cache *viewCache
}

func (b base) now() time.Time { return b.clock.Now().UTC() }

// exec runs a command and logs what it wrote.
func (b base) exec(ctx context.Context, reactor string, cmd decide.Command) (Result, error) {
	res, err := b.svc.Execute(ctx, cmd)
	if err != nil {
		return res, fmt.Errorf("%T: %w", cmd, err)
	}
	for _, e := range res.Events {
		ref := e.Data.Reference()
		b.log.Info("reactor wrote", "reactor", reactor, "event", string(e.Data.EventType()), "slot", ref.Slot, "claim", ref.Claim, "attempt", ref.Attempt, "cause", ref.Cause, "seq", e.Seq)
	}
	return res, nil
}

// slotView is a private copy of what the reactors read of one slot: the
// views are shared and change under the runner, so nothing is kept from a
// Read.
type slotView struct {
	Exists  bool
	Active  bool // declared, not retired
	Slot    projections.Slot
	GroupOK bool
	Group   events.GroupSpec
	// Live is the slot's live claim (marked included), Newest its newest
	// claim in the views (live or terminal).
	Live, Newest *projections.Claim
	// Terminal are the slot's terminal claims still in the views: what
	// the collector reads of them, not a copy of each whole claim, which a
	// replay would allocate on every pass.
	Terminal []terminalClaim
	// LiveStopJobs counts the shutdown Jobs fired for Live.
	LiveStopJobs int
}

func (b base) view(slot string) slotView {
	var v slotView
	b.views.Read(func(s *projections.State) {
		if b.cache != nil {
			v = b.cache.get(s, slot, func() slotView { return buildView(s, slot) })
			return
		}
		v = buildView(s, slot)
	})
	return v
}

// buildView copies the slot's view out of s.
func buildView(s *projections.State, slot string) slotView {
	var v slotView
	sl := s.Slots[slot]
	if sl == nil {
		return v
	}
	v.Exists = true
	v.Active = !sl.Retired && sl.Group != ""
	v.Slot = *sl
	v.Slot.Claims = slices.Clone(sl.Claims)
	v.Slot.Node.Taints = slices.Clone(sl.Node.Taints)
	if sl.LastShutdown != nil {
		ls := *sl.LastShutdown
		v.Slot.LastShutdown = &ls
	}
	if g := s.Groups[sl.Group]; g != nil {
		v.GroupOK, v.Group = true, g.Spec
	}
	if c := s.LiveOfSlot(slot); c != nil {
		v.Live = copyClaim(c)
		v.LiveStopJobs = decide.StopJobsFired(c)
	}
	if n := len(sl.Claims); n > 0 {
		if c := s.Claims[sl.Claims[n-1]]; c != nil {
			v.Newest = copyClaim(c)
		}
	}
	terminal := 0
	for _, name := range sl.Claims {
		if c := s.Claims[name]; c != nil && c.Phase.IsTerminal() {
			terminal++
		}
	}
	if terminal > 0 {
		v.Terminal = make([]terminalClaim, 0, terminal)
	}
	for _, name := range sl.Claims {
		if c := s.Claims[name]; c != nil && c.Phase.IsTerminal() {
			tc := terminalClaim{Name: c.Name, TTL: c.TTL}
			if c.FinishedAt != nil {
				tc.FinishedAt = *c.FinishedAt
			}
			v.Terminal = append(v.Terminal, tc)
		}
	}
	return v
}

// terminalClaim is a terminal claim of a slot view: when it may be
// collected.
type terminalClaim struct {
	Name string
	// FinishedAt is zero when the claim has no end on record.
	FinishedAt time.Time
	TTL        events.Duration
}

func copyClaim(c *projections.Claim) *projections.Claim {
	cp := *c
	cp.Timeline = nil
	if c.Drain != nil {
		// The views change a drain in place (DrainTimedOut).
		d := *c.Drain
		d.Pods, d.Remaining = slices.Clone(d.Pods), slices.Clone(d.Remaining)
		cp.Drain = &d
	}
	return &cp
}

func (v slotView) timeouts() projections.Timeouts { return projections.TimeoutsOf(v.Group.Lifecycle) }

// jobRequest builds the request of a lifecycle Job of the slot.
func (b base) jobRequest(v slotView, name, claim string, attempt int, op string, spec *events.JobSpec) JobRequest {
	req := JobRequest{
		Name: name, Namespace: b.ns, Slot: v.Slot.Name, Claim: claim, Attempt: attempt, Operation: op,
		Timeout: v.timeouts().JobTimeout,
		Labels: map[string]string{
			LabelClaim: claim, LabelSlot: LabelValue(v.Slot.Name), LabelAttempt: strconv.Itoa(attempt), LabelOperation: op,
		},
		Annotations: map[string]string{AnnotationSlot: v.Slot.Name},
		Env: map[string]string{
			EnvSlot: v.Slot.Name, EnvClaim: claim, EnvOperation: op,
			EnvProviderID: v.Slot.CurrentProviderID(), EnvAddress: v.Slot.Spec.Address,
		},
	}
	if spec != nil {
		req.Spec = *spec
	}
	return req
}

// fireShutdownJob creates the shutdown Job a ShutdownFired just recorded
// and records what the API server answered (JobObserved).
func (b base) fireShutdownJob(ctx context.Context, reactor string, v slotView, job, claim string, attempt int) (created bool, err error) {
	if v.Slot.Spec.Shutdown == nil {
		b.log.Warn("slot declares no shutdown Job: its machine cannot be powered off", "slot", v.Slot.Name, "job", job)
		return false, nil
	}
	return b.createObserved(ctx, reactor, b.jobRequest(v, job, claim, attempt, decide.OperationShutdown, v.Slot.Spec.Shutdown))
}

// shutdownObserved: the cluster showed the slot's shutdown Job job
// (JobObserved): it is never created again.
func shutdownObserved(v slotView, job string) bool {
	ls := v.Slot.LastShutdown
	return ls != nil && ls.Job == job && ls.Observed
}

// shutdownInFlight looks at the last shutdown Job fired at `at`: running,
// or finished less than ShutdownSettle ago, or recorded and never observed
// (recoverJob: the cache, then the API server, then a create: a crash
// between the append and the create). A Job gone from the cluster (its
// TTL, a person) ran, and the log, not the cache, says when: the end its
// outcome recorded or, with none, at the latest its timeout after it was
// observed (or fired); the machine has ShutdownSettle after that. It returns how
// long to wait, 0 when the next shutdown may fire.
func (b base) shutdownInFlight(ctx context.Context, reactor string, v slotView, job, claim string, attempt int, at time.Time) (time.Duration, error) {
	if job == "" {
		return 0, nil
	}
	now := b.now()
	timeout := v.timeouts().JobTimeout
	st, ok := b.cluster.Job(job)
	if !shutdownObserved(v, job) && v.Slot.Spec.Shutdown != nil && (ok || now.Before(at.Add(timeout))) {
		created, err := b.recoverJob(ctx, reactor, b.jobRequest(v, job, claim, attempt, decide.OperationShutdown, v.Slot.Spec.Shutdown))
		if err != nil {
			return 0, err
		}
		if created {
			b.log.Info(jobCreatedLine(decide.OperationShutdown, true, true), "slot", v.Slot.Name, "claim", claim, "job", job)
		}
		if !ok {
			return projections.JobMonitorPollInterval, nil
		}
	}
	if !ok {
		end := at
		ls := v.Slot.LastShutdown
		if ls != nil && ls.Job != job {
			ls = nil
		}
		switch {
		case ls != nil && ls.Outcome != nil:
			end = ls.Outcome.FinishedAt
			if end.IsZero() {
				end = ls.Outcome.RecordedAt
			}
		case ls != nil && ls.ObservedAt != nil && ls.ObservedAt.After(end):
			end = ls.ObservedAt.Add(timeout)
		default:
			end = end.Add(timeout)
		}
		if settle := end.Add(ShutdownSettle); now.Before(settle) {
			return after(now, settle), nil
		}
		return 0, nil
	}
	if !st.Finished() {
		return projections.JobMonitorPollInterval, nil
	}
	done := st.FinishedAt
	if done.IsZero() {
		done = at
	}
	if settle := done.Add(ShutdownSettle); now.Before(settle) {
		return after(now, settle), nil
	}
	return 0, nil
}

// after is the requeue that lands just past t.
func after(now, t time.Time) time.Duration {
	if d := t.Sub(now) + time.Millisecond; d > 0 {
		return d
	}
	return time.Millisecond
}

// shutdownEvent returns the ShutdownFired a command wrote, if any.
func shutdownEvent(res Result) (events.ShutdownFired, bool) {
	for _, e := range res.Events {
		if d, ok := e.Data.(events.ShutdownFired); ok {
			return d, true
		}
	}
	return events.ShutdownFired{}, false
}
