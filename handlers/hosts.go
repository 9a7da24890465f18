package handlers

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// Elastic hosts (docs/design.md): the host a booting claim expects, the match of
// a registering Node to it and the refusal of a Node nothing expects; the
// loss of a host its provider reports gone is HostLoss's (hostloss.go).

// RefusedTaint is the taint a refused host gets.
var RefusedTaint = events.Taint{Key: TaintRefused, Effect: "NoExecute"}

// Hosts records the expected host of a booting claim when its startup Job
// reports the instance it bought (HostExpected), matches the
// registering Node to it (HostJoined: providerID first, then name) and
// gives the host its group's template labels and taints, and refuses a
// Node nothing expects: no live claim on its slot (none made, or its claim
// ended, e.g. past its deadline), a decommissioned slot, or a providerID
// other than the expected one. A refused Node is cordoned, tainted
// claimstream.dev/refused:NoExecute and reported (HostJoinRefused); the
// input law shuts its machine down.
type Hosts struct {
	base
	silent *silentJobs
}

// silentJobs remembers, per slot, the succeeded startup Job whose output
// named no instance. A finished Job's output does not change in a cluster
// (the pod's termination message is written before the Job succeeds), but
// a report written onto the pod late (a test's machine model does) must
// still be read: the output counts as silent once it read empty twice,
// silentAfter apart. From then on the passes of the booting slot do not
// list the Job's pods again (they listed them at every pass, 13 times per
// boot in the simulator). One entry per slot.
type silentJobs struct {
	mu     sync.Mutex
	bySlot map[string]silentRead
}

// silentAfter is how long after its first empty read a startup Job's
// output is taken as final.
const silentAfter = 10 * time.Second

type silentRead struct {
	job     string
	first   time.Time // the first empty read
	settled bool
}

func newSilentJobs() *silentJobs { return &silentJobs{bySlot: map[string]silentRead{}} }

// is: the Job's output was settled as silent.
func (s *silentJobs) is(slot, job string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.bySlot[slot]
	return r.job == job && r.settled
}

// readEmpty notes an empty read of the Job's output at now.
func (s *silentJobs) readEmpty(slot, job string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.bySlot[slot]
	if r.job != job {
		s.bySlot[slot] = silentRead{job: job, first: now}
		return
	}
	if now.Sub(r.first) >= silentAfter {
		r.settled = true
		s.bySlot[slot] = r
	}
}

func (r *Hosts) Name() string { return "hosts" }

func (r *Hosts) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if !v.GroupOK || !v.Active {
		return 0, nil
	}
	cl := v.Live
	if cl != nil && cl.Phase == projections.PhaseBooting && cl.Expected == nil {
		if err := r.expect(ctx, v, cl); err != nil {
			return 0, err
		}
		// The report may name another Node than the slot's: read again.
		if v = r.view(slot); !v.GroupOK || !v.Active {
			return 0, nil
		}
		cl = v.Live
	}
	if cl != nil && cl.Phase == projections.PhaseBooting {
		// Until its startup Job succeeded, the Job's report may still name
		// another host: a Node up under the slot's name now (a machine
		// switched on by hand) is not yet the one the claim expects.
		if j, ok := r.cluster.Job(cl.StartupJob); ok && j.Phase != JobSucceeded {
			return 0, nil
		}
	}
	node, present := r.cluster.Node(v.Slot.NodeName())
	if !present {
		return 0, nil
	}
	if cl != nil && (cl.Phase == projections.PhaseBooting || cl.Phase == projections.PhaseReady) {
		by, why := matchHost(v, cl, node)
		if why == "" {
			return 0, r.joined(ctx, v, cl, node, by)
		}
		return 0, r.refuse(ctx, v, node, why)
	}
	if cl != nil {
		return 0, nil // pending: the boot that follows owns the machine
	}
	if why := unexpected(v, node); why != "" {
		return 0, r.refuse(ctx, v, node, why)
	}
	return 0, nil
}

// expect records the host a booting claim expects once its startup Job
// reports the instance it bought (a provisioning Job's termination
// message). Without a report the expected host is the slot's own (its
// name, providerID and address, by the claim's deadline): the views derive
// it (ExpectedHostOf) and nothing is written.
func (r *Hosts) expect(ctx context.Context, v slotView, cl *projections.Claim) error {
	if cl.Expected != nil || cl.StartupJob == "" {
		return nil
	}
	if j, ok := r.cluster.Job(cl.StartupJob); !ok || j.Phase != JobSucceeded {
		return nil
	}
	if r.silent.is(v.Slot.Name, cl.StartupJob) {
		return nil
	}
	out, err := r.cluster.JobOutput(ctx, cl.StartupJob)
	if err != nil {
		return err
	}
	rep, err := ParseJobReport(out)
	if err != nil {
		// A machine may have been bought that nothing can match: never
		// expect the slot's defaults in its place. The claim fails with
		// the report in its message and its machine is forced off.
		msg := fmt.Sprintf("startup Job %s reported an instance that cannot be read (%v): the host it bought cannot be matched", cl.StartupJob, err)
		r.log.Warn("startup Job report unreadable: failing the claim", "slot", v.Slot.Name, "claim", cl.Name, "job", cl.StartupJob, "err", err)
		_, err = r.exec(ctx, r.Name(), decide.FailInPhase{Phase: projections.PhaseBooting, FailClaim: decide.FailClaim{
			Claim: cl.Name, Reason: projections.ReasonStartupJobFailed, Message: msg, ForceShutdown: true,
			Cause: "startup Job report unreadable",
		}})
		return err
	}
	if rep.InstanceID == "" {
		r.silent.readEmpty(v.Slot.Name, cl.StartupJob, r.now())
		return nil
	}
	want := decide.ExpectHost{Claim: cl.Name, Node: v.Slot.Name, ProviderID: v.Slot.ProviderID(), Address: v.Slot.Spec.Address, InstanceID: rep.InstanceID}
	if rep.ProviderID != "" {
		want.ProviderID = rep.ProviderID
	}
	if rep.Address != "" {
		want.Address = rep.Address
	}
	if rep.Node != "" {
		want.Node = rep.Node
	}
	_, err = r.exec(ctx, r.Name(), want)
	return err
}

// matchHost matches a Node to the claim that expects it: providerID first,
// then name (the slot's Node name: its own, or the one its startup Job
// reported; a Node that reports no providerID yet is matched by name). It
// returns why not otherwise.
func matchHost(v slotView, cl *projections.Claim, n NodeView) (by, why string) {
	want := v.Slot.ProviderID()
	if cl.Expected != nil && cl.Expected.ProviderID != "" {
		want = cl.Expected.ProviderID
	}
	switch {
	case n.ProviderID != "" && n.ProviderID == want:
		return "providerID", ""
	case n.ProviderID == "" && n.Name == v.Slot.NodeName():
		return "name", ""
	}
	return "", fmt.Sprintf("node %s has providerID %s, claim %s expects %s", n.Name, n.ProviderID, cl.Name, want)
}

// unexpected says why a Node on a slot with no live claim is a host nothing
// expects, or "" when it is not a join (the Node of a machine already
// switched off, left for the node cleanup).
func unexpected(v slotView, n NodeView) string {
	joined := n.Ready
	if nw := v.Newest; nw == nil || nw.FinishedAt == nil || n.CreatedAt.After(*nw.FinishedAt) {
		joined = true
	}
	if d := v.Slot.Decommissioned; d != nil && n.CreatedAt.After(d.At) {
		joined = true
	}
	if !joined {
		return ""
	}
	switch nw := v.Newest; {
	case v.Slot.Decommissioned != nil:
		d := v.Slot.Decommissioned
		why := fmt.Sprintf("slot %s is decommissioned (by %s at %s)", v.Slot.Name, d.By, d.At.Format(time.RFC3339))
		if d.Reason != "" {
			why += ": " + d.Reason
		}
		return why
	case nw != nil && nw.DeadlineAt != nil && nw.ReadyAt == nil && n.CreatedAt.After(*nw.DeadlineAt):
		return fmt.Sprintf("joined at %s, after the deadline %s of claim %s, which ended %s (%s): nothing expects a host on slot %s",
			n.CreatedAt.Format(time.RFC3339), nw.DeadlineAt.Format(time.RFC3339), nw.Name, nw.Phase, nw.Reason, v.Slot.Name)
	case nw != nil && nw.FinishedAt != nil:
		return fmt.Sprintf("claim %s ended %s (%s) at %s: nothing expects a host on slot %s", nw.Name, nw.Phase, nw.Reason, nw.FinishedAt.Format(time.RFC3339), v.Slot.Name)
	}
	return fmt.Sprintf("no claim expects a host on slot %s", v.Slot.Name)
}

func (r *Hosts) joined(ctx context.Context, v slotView, cl *projections.Claim, n NodeView, by string) error {
	// Every match is recorded once per claim: the host the provisioning
	// Job reported, or the slot's own machine under its own name and
	// providerID.
	if cl.Joined == nil {
		if _, err := r.exec(ctx, r.Name(), decide.JoinHost{Claim: cl.Name, Node: n.Name, MatchedBy: by}); err != nil {
			return err
		}
	}
	if n.HasTaint(RefusedTaint) {
		if err := r.cluster.RemoveNodeTaint(ctx, n.Name, TaintRefused); err != nil {
			return fmt.Errorf("remove %s from %s: %w", TaintRefused, n.Name, err)
		}
	}
	// The template's part now (the readiness gate applies the slot's own
	// labels and taints once the startup Job is done).
	labels, taints := HostConfig(v.Slot.Group, v.Group, events.SlotSpec{})
	return r.cluster.ApplySlotConfig(ctx, n.Name, labels, taints)
}

// HostConfig is what a joining host is given: its group's template labels
// and taints, then its slot's (the slot wins a label both set), and the
// group label.
func HostConfig(group string, g events.GroupSpec, s events.SlotSpec) (map[string]string, []events.Taint) {
	labels := map[string]string{LabelGroup: LabelValue(group)}
	var taints []events.Taint
	if t := g.Template; t != nil {
		maps.Copy(labels, t.Labels)
		taints = append(taints, t.Taints...)
	}
	maps.Copy(labels, s.Labels)
	taints = append(taints, s.Taints...)
	return labels, taints
}

func (r *Hosts) refuse(ctx context.Context, v slotView, n NodeView, why string) error {
	return refuseNode(ctx, r.base, r.Name(), v.Slot.Name, v.Slot.Group, n, why)
}
