package whatif

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// Requester is who a replay's calls say asked when the recording does not.
const Requester = "whatif"

// demandNamespace holds the pods that play the built-in groups' work.
const demandNamespace = "whatif-demand"

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// Progress is how far a run has got: simulated time covered of the period.
type Progress struct {
	Run     string
	Covered time.Duration
	Total   time.Duration
}

// Percent is the share of the period covered, 0 to 100.
func (p Progress) Percent() float64 {
	if p.Total <= 0 {
		return 100
	}
	return 100 * float64(p.Covered) / float64(p.Total)
}

// replayer is one run: a temporary log, the production views, service and
// reactors over a simulated cluster, on a fake clock from the period's start.
type replayer struct {
	rec      *Recording
	name     string
	dir      string
	emb      *natsserver.Embedded
	store    *eventlog.Store
	views    *projections.Runner
	svc      *handlers.Service
	clk      *clocktesting.FakeClock
	world    *sim.World
	stopView context.CancelFunc
	viewDone chan error
	podSeq   int
}

func startReplayer(ctx context.Context, rec *Recording, name string, cfg *pool.Config, seed int64) (_ *replayer, err error) {
	r := &replayer{rec: rec, name: name}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.dir, err = os.MkdirTemp("", "claimstream-whatif-*"); err != nil {
		return r, fmt.Errorf("temporary log: %w", err)
	}
	if r.emb, err = natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: r.dir, NoSync: true, ServerName: "whatif"}); err != nil {
		return r, fmt.Errorf("temporary log: %w", err)
	}
	js, err := jetstream.New(r.emb.Conn)
	if err != nil {
		return r, fmt.Errorf("temporary log: %w", err)
	}
	if r.store, err = eventlog.OpenStore(ctx, js, eventlog.StoreConfig{Logger: discard, Memory: true}); err != nil {
		return r, fmt.Errorf("temporary log: %w", err)
	}
	r.views = projections.NewRunner(r.store, projections.RunnerOptions{Logger: discard})
	if err := r.views.Start(ctx); err != nil {
		return r, fmt.Errorf("replay views: %w", err)
	}
	vctx, cancel := context.WithCancel(ctx)
	r.stopView, r.viewDone = cancel, make(chan error, 1)
	go func() { r.viewDone <- r.views.Run(vctx) }()
	r.clk = clocktesting.NewFakeClock(rec.From)
	r.svc = handlers.NewService(r.store, r.views, r.clk, "/claimstream/whatif", discard)
	applier := &pool.Applier{Service: r.svc, Views: r.views, Clock: r.clk, Log: discard}
	if _, err := applier.Apply(ctx, cfg); err != nil {
		return r, fmt.Errorf("run %s: apply the pool: %w", name, err)
	}
	// Stepped: the reactors run the work items their events, cache changes
	// and requeues mark due, as production's work queue does, not every
	// slot at every instant; a full resync every MaxIdleJump, and a
	// requeue waits as long as its reactor asked (up to that).
	// No informer lag of its own: the recorded boots and readiness gates
	// already hold the real cluster's.
	r.world = sim.NewWorld(sim.WorldConfig{Views: r.views, Service: r.svc, Clock: r.clk, Seed: seed, Log: discard, WatchDelay: -1, Timing: sim.Timing{PodsPerNode: rec.PodsPerNode, FinishedJobTTL: finishedJobTTL(cfg)},
		Stepped: true, Resync: MaxIdleJump, MaxRequeue: MaxIdleJump})
	for _, sl := range cfg.Slots {
		if m, ok := rec.Models[sl.Name]; ok {
			r.world.Sim.SetKnobs(sl.Name, m.Knobs())
		}
	}
	if err := r.world.Start(ctx); err != nil {
		return r, fmt.Errorf("run %s: simulated cluster: %w", name, err)
	}
	return r, nil
}

// finishedJobTTL is how long a run's simulated cluster keeps a finished
// lifecycle Job the pool gave no ttlSecondsAfterFinished: twice the
// longest window in which a reactor may still look for it (a group's job
// timeout, registration wait, readiness gate, provisioning deadline and
// drain timeout one after the other), and at least an hour. A Job is read
// while its claim boots or shuts down, not after; kept for the whole
// period, a busy week's Jobs would be most of a run's memory and of the
// collector's work.
func finishedJobTTL(cfg *pool.Config) time.Duration {
	ttl := time.Hour
	for _, g := range cfg.Groups {
		t := projections.TimeoutsOf(g.Spec.Lifecycle)
		window := t.JobTimeout + t.RegistrationWait + t.ReadinessGate + g.Spec.MaxNodeProvisionTime.D() + g.Spec.DrainTimeout.D()
		ttl = max(ttl, 2*window)
	}
	return ttl
}

func (r *replayer) close() {
	if r.world != nil {
		r.world.Stop()
	}
	if r.stopView != nil {
		r.stopView()
		<-r.viewDone
	}
	if r.emb != nil {
		r.emb.Shutdown()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// fact is one recorded demand fact, in time order.
type fact struct {
	at  time.Time
	req *events.ScaleRequested
	pod *PodWork
}

func (rec *Recording) facts() []fact {
	var fs []fact
	for g, n := range rec.LiveAtFrom {
		fs = append(fs, fact{at: rec.From, req: &events.ScaleRequested{Ref: events.Ref{Group: g}, Call: events.CallIncreaseSize, Delta: n, Requester: Requester, Accepted: true}})
	}
	slices.SortFunc(fs, func(a, b fact) int { return compareStrings(a.req.Group, b.req.Group) })
	for i := range rec.Requests {
		fs = append(fs, fact{at: rec.RequestTimes[i], req: &rec.Requests[i]})
	}
	for i := range rec.Work {
		fs = append(fs, fact{at: rec.Work[i].Arrive, pod: &rec.Work[i]})
	}
	slices.SortStableFunc(fs, func(a, b fact) int { return a.at.Compare(b.at) })
	return fs
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// run asks the recorded demand of the simulated pool until the period's
// end, and measures the log it wrote.
func (r *replayer) run(ctx context.Context, progress func(Progress)) (Outcome, error) {
	total := r.rec.To.Sub(r.rec.From)
	lastPct := -1
	report := func() {
		if progress == nil {
			return
		}
		p := Progress{Run: r.name, Covered: r.clk.Now().Sub(r.rec.From), Total: total}
		if pct := int(p.Percent()); pct > lastPct {
			lastPct = pct
			progress(p)
		}
	}
	report()
	for _, f := range r.rec.facts() {
		if err := ctx.Err(); err != nil {
			return Outcome{}, err
		}
		if f.at.After(r.clk.Now()) {
			if err := r.advance(ctx, f.at, report); err != nil {
				return Outcome{}, fmt.Errorf("run %s at %s: %w", r.name, r.clk.Now().Format(time.RFC3339), err)
			}
		}
		var err error
		if f.pod != nil {
			err = r.arrive(ctx, *f.pod)
		} else {
			err = r.ask(ctx, *f.req)
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("run %s at %s: %w", r.name, r.clk.Now().Format(time.RFC3339), err)
		}
		report()
	}
	if r.rec.To.After(r.clk.Now()) {
		if err := r.advance(ctx, r.rec.To, report); err != nil {
			return Outcome{}, fmt.Errorf("run %s: %w", r.name, err)
		}
	}
	report()
	m := newMeasure(r.rec.From, r.rec.To)
	if err := r.store.Read(ctx, 1, 0, func(e events.Event) error { m.apply(e); return nil }); err != nil {
		return Outcome{}, fmt.Errorf("run %s: read its log: %w", r.name, err)
	}
	return m.outcome(r.name), nil
}

// MaxIdleJump bounds how far the replay's clock jumps when no work item is
// due and the simulated world has nothing due: it is the replay's full
// resync of every work item (production's is projections.ReconcilePeriod,
// a safety net under the feeds; a replay jumps its clock past the instants
// where nothing is due, see advance).
const MaxIdleJump = 30 * time.Minute

// advance drives the fake clock to until: a pass of the simulator and the
// reactors' due work items, then a jump to the soonest of until, the next
// timer of the work items (a requeue, a retry or the resync) and the
// simulator's next action. A replay needs no pass where nothing is due
// (what makes a week replay in seconds), and a pass at the instants that
// are is what the production loop would have done then.
func (r *replayer) advance(ctx context.Context, until time.Time, report func()) error {
	for {
		next, err := r.world.Pass(ctx)
		if err != nil {
			return err
		}
		now := r.clk.Now()
		if !now.Before(until) {
			return nil
		}
		at := until
		if d := min(next, MaxIdleJump); now.Add(d).Before(at) {
			at = now.Add(d)
		}
		if s, ok := r.world.Sim.NextAt(); ok && s.Before(at) {
			at = s
		}
		if !at.After(now) {
			at = now.Add(time.Millisecond)
		}
		r.clk.SetTime(at)
		report()
	}
}

// ask makes one recorded call again. A call the run's pool refuses is
// recorded in its log like any refusal; it is no error of the replay.
func (r *replayer) ask(ctx context.Context, req events.ScaleRequested) error {
	by := req.Requester
	if by == "" {
		by = Requester
	}
	var cmd decide.Command
	switch req.Call {
	case events.CallIncreaseSize:
		cmd = decide.IncreaseSize{Group: req.Group, Delta: req.Delta, RequestedBy: by}
	case events.CallDecreaseTargetSize:
		cmd = decide.DecreaseTargetSize{Group: req.Group, Delta: req.Delta, RequestedBy: by}
	case events.CallDeleteNodes:
		nodes := r.nodesToDelete(req)
		if len(nodes) == 0 {
			return nil
		}
		cmd = decide.DeleteNodes{Group: req.Group, Nodes: nodes, RequestedBy: by}
	default:
		return nil
	}
	_, err := r.svc.Execute(ctx, cmd)
	if decide.CodeOf(err) != 0 {
		return nil
	}
	return err
}

// nodesToDelete maps the recorded DeleteNodes onto this run's machines: a
// named node whose slot has a live claim here is taken as named; for one
// that has none here (another config put the claim elsewhere) the run's
// newest ready claim of the group not yet named nor scaled down stands in.
func (r *replayer) nodesToDelete(req events.ScaleRequested) []decide.NodeRef {
	var out []decide.NodeRef
	r.views.Read(func(s *projections.State) {
		taken := map[string]bool{}
		var spare []*projections.Claim
		for _, cl := range s.LiveClaims(req.Group) {
			if cl.Phase == projections.PhaseReady && cl.ScaleDown == nil {
				spare = append(spare, cl)
			}
		}
		slices.SortStableFunc(spare, func(a, b *projections.Claim) int { return b.RequestedAt.Compare(a.RequestedAt) })
		for _, name := range req.Nodes {
			sl, ok := s.SlotForNode(name, name)
			if ok && s.LiveOfSlot(sl.Name) != nil && s.LiveOfSlot(sl.Name).ScaleDown == nil && !taken[sl.Name] {
				taken[sl.Name] = true
				out = append(out, decide.NodeRef{Name: sl.Name})
				continue
			}
			for _, cl := range spare {
				if !taken[cl.Slot] {
					taken[cl.Slot] = true
					out = append(out, decide.NodeRef{Name: cl.Slot})
					break
				}
			}
		}
	})
	return out
}

// arrive creates one pod of the recorded work: it waits for a node like
// the recorded one did, and runs as long once it has one.
func (r *replayer) arrive(ctx context.Context, p PodWork) error {
	r.podSeq++
	name := fmt.Sprintf("work-%07d", r.podSeq)
	if err := r.world.Sim.RunPod(ctx, sim.PodSpec{Namespace: demandNamespace, Name: name, RunsFor: p.Runs}); err != nil {
		return fmt.Errorf("demand: create pod %s: %w", name, err)
	}
	return nil
}
