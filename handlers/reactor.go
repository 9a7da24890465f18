package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// What every reactor shares: base (the clock, the cluster, the service and
// the views), the view of one slot a pass reads, and the acts several
// reactors take.

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

// The side effects the reactors share. Each runs only after the event that
// decides it is in the log (append, then act), and each writes one log line
// when it changes something.

// cordon marks the slot's Node unschedulable (idempotent: the adapter
// leaves a cordoned Node as it is); the log line is written only when the
// cache saw the Node schedulable.
func (b base) cordon(ctx context.Context, slot, claim, why string) error {
	node := slot
	if v := b.view(slot); v.Exists {
		node = v.Slot.NodeName()
	}
	n, ok := b.cluster.Node(node)
	if err := b.cluster.Cordon(ctx, node); err != nil {
		return fmt.Errorf("cordon %s: %w", node, err)
	}
	if ok && !n.Unschedulable {
		b.log.Info("node cordoned", "slot", slot, "node", node, "claim", claim, "why", why)
	}
	return nil
}

// jobOutcome is what a JobObserved records of a finished Job.
func jobOutcome(st JobState) (outcome string, finishedAt *time.Time, reason string) {
	switch st.Phase {
	case JobSucceeded:
		outcome = events.JobSucceeded
	case JobFailed:
		outcome, reason = events.JobFailed, st.Reason
	default:
		return "", nil, ""
	}
	if !st.FinishedAt.IsZero() {
		at := st.FinishedAt.UTC()
		finishedAt = &at
	}
	return outcome, finishedAt, reason
}

// failureMessage is what a failed Job said of its failure (its pod's
// termination message: a power driver writes "<Reason>: <message>"), on
// one line and bounded for the log.
func (b base) failureMessage(ctx context.Context, job string) (string, error) {
	out, err := b.cluster.JobOutput(ctx, job)
	if err != nil {
		return "", fmt.Errorf("read the failure of Job %s: %w", job, err)
	}
	return OneLine(out, events.MaxJobMessage), nil
}

// OneLine makes text fit a log line: its lines joined with "; ", control
// characters dropped, at most max bytes (cut at a character's start).
func OneLine(text string, max int) string {
	var sb strings.Builder
	for i, l := range strings.Split(strings.TrimSpace(text), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if i > 0 && sb.Len() > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || r == utf8.RuneError {
				return -1
			}
			return r
		}, l))
	}
	s := sb.String()
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// observeJob appends the JobObserved of a Job the cluster showed.
func (b base) observeJob(ctx context.Context, reactor string, req JobRequest, created bool, how string) error {
	_, err := b.exec(ctx, reactor, decide.ObserveJob{Slot: req.Slot, Claim: req.Claim, Job: req.Name, Operation: req.Operation, Created: created, Cause: how})
	return err
}

// createObserved creates a lifecycle Job the log recorded and records
// what the API server answered (JobObserved): created, or found there.
func (b base) createObserved(ctx context.Context, reactor string, req JobRequest) (created bool, err error) {
	created, err = b.cluster.CreateJob(ctx, req)
	if err != nil {
		return false, fmt.Errorf("create %s Job %s: %w", req.Operation, req.Name, err)
	}
	how := reactor + ": " + req.Operation + " Job created"
	if !created {
		how = reactor + ": " + req.Operation + " Job found (AlreadyExists)"
	}
	if err := b.observeJob(ctx, reactor, req, created, how); err != nil {
		return created, err
	}
	return created, nil
}

// recoverJob is the pass over a lifecycle Job the log recorded
// (ClaimBooting, ShutdownFired) and never saw observed: one the cache shows
// is recorded; one the cache lacks is read from the API server, and
// created only when that read finds none either (the process died between
// the append and the create). It reports whether it created the Job.
func (b base) recoverJob(ctx context.Context, reactor string, req JobRequest) (created bool, err error) {
	if _, ok := b.cluster.Job(req.Name); ok {
		return false, b.observeJob(ctx, reactor, req, false, reactor+": "+req.Operation+" Job seen in the cluster")
	}
	if _, ok, err := b.cluster.GetJob(ctx, req.Name); err != nil {
		return false, err
	} else if ok {
		return false, b.observeJob(ctx, reactor, req, false, reactor+": "+req.Operation+" Job read from the API server")
	}
	return b.createObserved(ctx, reactor, req)
}

// refuseNode reports a refused Node once per Node object (append), then
// cordons and taints it (act); both acts are idempotent and each one taken
// is logged. slot is the slot the Node joined as, or StrayHostsSlot.
func refuseNode(ctx context.Context, b base, reactor, slot, group string, n NodeView, why string) error {
	if _, err := b.exec(ctx, reactor, decide.RefuseHost{Slot: slot, Group: group, Node: n.Name, CreatedAt: n.CreatedAt, Why: why}); err != nil {
		return err
	}
	if !n.Unschedulable {
		if err := b.cluster.Cordon(ctx, n.Name); err != nil {
			return fmt.Errorf("cordon refused node %s: %w", n.Name, err)
		}
		b.log.Info("cordoned a refused node", "reactor", reactor, "node", n.Name, "slot", slot, "group", group)
	}
	if !n.HasTaint(RefusedTaint) {
		if err := b.cluster.AddNodeTaint(ctx, n.Name, RefusedTaint); err != nil {
			return fmt.Errorf("taint refused node %s: %w", n.Name, err)
		}
		b.log.Info("tainted a refused node", "reactor", reactor, "node", n.Name, "taint", RefusedTaint.String(), "slot", slot, "group", group)
	}
	return nil
}
