package provider

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// readSnapshots answer cluster-autoscaler's frequent reads (NodeGroups,
// NodeGroupTargetSize, NodeGroupNodes) without the views' lock. The views'
// RWMutex makes a read wait for a pending fold, and the fold waits for the
// longest reader in (a reactor's scan, the dashboard, the status report):
// under churn that put milliseconds on reads that take microseconds.
//
// Instead, each served group's answers are built once per change of the
// group and published in an immutable readSnapshot behind an atomic
// pointer. The build runs in the views' publish hook (Runner.Publish),
// under the fold's write lock, so a snapshot is never behind the views and
// never shows half an event: a read after a write (whose command waited for
// the views) sees the write. Only the groups an event touched are built
// again; the others' answers are shared with the previous snapshot.
//
// Answers that change with time alone (a resting slot's pause ends, a failed
// instance leaves the list after RecentFailureWindow) carry the instant they
// stop being true; a read at or past it, or before the build (a clock set
// back), is answered from the views under their lock, as before, and
// publishes the rebuilt answers for the next reads.
type readSnapshots struct {
	serves func(*projections.Group) bool
	clock  clock.PassiveClock
	cur    atomic.Pointer[readSnapshot]
	// slotGroup is the group of every slot as of the last publish, so an
	// event that moves a slot rebuilds the group it left too. Only the
	// publish hook uses it (under the views' write lock).
	slotGroup map[string]string
}

// readSnapshot is the answers of every served group at one sequence of the
// views. Nothing in it changes once published: callers share it.
type readSnapshot struct {
	seq    uint64
	groups map[string]*groupAnswers // served, active groups; any other is NotFound
	names  []string                 // sorted keys of groups
	list   *pb.NodeGroupsResponse
	// latest is the newest build instant among groups, listUntil the
	// soonest instant a NodeGroups entry changes with time (zero: never).
	latest    time.Time
	listUntil time.Time
}

// groupAnswers are one group's answers, built at builtAt.
type groupAnswers struct {
	builtAt time.Time
	target  *pb.NodeGroupTargetSizeResponse
	nodes   *pb.NodeGroupNodesResponse
	// nodeSlots is the index in the group's slots of each instance, so
	// the next build reuses the instances that did not change.
	nodeSlots  []int
	nodesUntil time.Time // zero: the instances do not change with time alone
	entry      *pb.NodeGroup
	entryUntil time.Time // zero: the entry does not change with time alone
}

func newReadSnapshots(serves func(*projections.Group) bool, clk clock.PassiveClock) *readSnapshots {
	return &readSnapshots{serves: serves, clock: clk}
}

// nodesGoodAt tells whether the group's instances are still those of now.
func (a *groupAnswers) nodesGoodAt(now time.Time) bool {
	return !now.Before(a.builtAt) && (a.nodesUntil.IsZero() || now.Before(a.nodesUntil))
}

func (a *groupAnswers) goodAt(now time.Time) bool {
	return a.nodesGoodAt(now) && (a.entryUntil.IsZero() || now.Before(a.entryUntil))
}

// listGoodAt tells whether the NodeGroups answer is still that of now.
func (s *readSnapshot) listGoodAt(now time.Time) bool {
	return !now.Before(s.latest) && (s.listUntil.IsZero() || now.Before(s.listUntil))
}

// publish is the views' publish hook: it runs under their write lock after
// every fold (e the event) and when the views are replaced (e nil).
func (r *readSnapshots) publish(st *projections.State, e *events.Event) {
	now := r.clock.Now()
	prev := r.cur.Load()
	touched := r.touched(st, e)
	if prev == nil || touched == nil {
		r.cur.Store(r.assemble(st, now, nil, nil, nil))
		return
	}
	r.cur.Store(r.assemble(st, now, prev, touched, nil))
}

// touched lists the groups e may have changed, or nil when it may have
// changed any (no event, or an event that names no group). It keeps
// slotGroup current.
func (r *readSnapshots) touched(st *projections.State, e *events.Event) []string {
	if e == nil || e.Data == nil || e.Data.Reference().Group == "" {
		r.slotGroup = make(map[string]string, len(st.Slots))
		for name, sl := range st.Slots {
			r.slotGroup[name] = sl.Group
		}
		return nil
	}
	ref := e.Data.Reference()
	out := []string{ref.Group}
	if ref.Slot != "" {
		if old := r.slotGroup[ref.Slot]; old != "" && old != ref.Group {
			out = append(out, old)
		}
		if sl := st.Slots[ref.Slot]; sl != nil {
			if sl.Group != "" && sl.Group != ref.Group {
				out = append(out, sl.Group)
			}
			r.slotGroup[ref.Slot] = sl.Group
		}
	}
	return out
}

// assemble builds the snapshot of st at now from prev: the groups in
// touched, or every group when prev is nil, are built again, and so are
// the groups stale says are (nil: none); the others are shared.
func (r *readSnapshots) assemble(st *projections.State, now time.Time, prev *readSnapshot, touched []string, stale func(*groupAnswers) bool) *readSnapshot {
	snap := &readSnapshot{seq: st.Seq}
	if prev == nil {
		snap.groups = make(map[string]*groupAnswers, len(st.Groups))
		for name, g := range st.Groups {
			if !g.Retired && r.serves(g) {
				snap.groups[name] = buildGroupAnswers(st, g, now, nil)
			}
		}
	} else {
		snap.groups = maps.Clone(prev.groups)
		if snap.groups == nil {
			snap.groups = map[string]*groupAnswers{}
		}
		for _, name := range touched {
			if g, ok := st.ActiveGroup(name); ok && r.serves(g) {
				snap.groups[name] = buildGroupAnswers(st, g, now, snap.groups[name])
			} else {
				delete(snap.groups, name)
			}
		}
		if stale != nil {
			for name, a := range snap.groups {
				if stale(a) {
					snap.groups[name] = buildGroupAnswers(st, st.Groups[name], now, a)
				}
			}
		}
	}
	if prev != nil && len(prev.names) == len(snap.groups) && hasAll(snap.groups, prev.names) {
		snap.names = prev.names
	} else {
		snap.names = slices.Sorted(maps.Keys(snap.groups))
	}
	entries := make([]*pb.NodeGroup, len(snap.names))
	for i, name := range snap.names {
		a := snap.groups[name]
		entries[i] = a.entry
		if a.builtAt.After(snap.latest) {
			snap.latest = a.builtAt
		}
		snap.listUntil = earliest(snap.listUntil, a.entryUntil)
	}
	snap.list = &pb.NodeGroupsResponse{NodeGroups: entries}
	return snap
}

func hasAll(groups map[string]*groupAnswers, names []string) bool {
	for _, n := range names {
		if groups[n] == nil {
			return false
		}
	}
	return true
}

// current returns the snapshot to answer from at now when every answer
// needed is good (good nil: the snapshot as it is); otherwise it builds the
// stale answers again from the views, under their read lock, and publishes
// them.
func (s *Server) current(good func(*readSnapshot, time.Time) bool) (*readSnapshot, time.Time) {
	snap := s.reads.cur.Load()
	now := s.clock.Now() // after the load: a build is never later than now
	if good(snap, now) {
		return snap, now
	}
	s.views.Read(func(st *projections.State) {
		// Under the read lock no fold runs, so the snapshot loaded here is
		// the views' own (the hook published it before the fold unlocked).
		base := s.reads.cur.Load()
		snap = s.reads.assemble(st, now, base, nil, func(a *groupAnswers) bool { return !a.goodAt(now) })
		// Another reader may have published the same sequence meanwhile;
		// either copy is right, so losing the swap is fine.
		s.reads.cur.CompareAndSwap(base, snap)
	})
	return snap, now
}

// buildGroupAnswers computes g's answers at now in one pass over its slots,
// reusing prev's instances that did not change. The counts are those of
// State.TargetSize, LiveClaims and FreeSlots; the instances those of
// NodeGroupNodes (see instanceOf).
func buildGroupAnswers(st *projections.State, g *projections.Group, now time.Time, prev *groupAnswers) *groupAnswers {
	a := &groupAnswers{builtAt: now}
	var target, live, free int
	nodes := make([]*pb.Instance, 0, len(g.Slots))
	var nodeSlots []int
	j := 0 // walks prev's instances alongside
	for i, name := range g.Slots {
		c := st.LiveOfSlot(name)
		switch {
		case c != nil:
			live++
			if c.WantsMachine() {
				target++
			}
		case st.IsFree(name, now):
			free++
		default:
			a.entryUntil = earliest(a.entryUntil, restEnds(st, name, now))
		}
		want, until, ok := instanceOf(st, name, c, now)
		if !ok {
			continue
		}
		a.nodesUntil = earliest(a.nodesUntil, until)
		in := (*pb.Instance)(nil)
		if prev != nil {
			for j < len(prev.nodeSlots) && prev.nodeSlots[j] < i {
				j++
			}
			if j < len(prev.nodeSlots) && prev.nodeSlots[j] == i && want.same(prev.nodes.Instances[j]) {
				in = prev.nodes.Instances[j]
			}
		}
		if in == nil {
			in = want.instance()
		}
		nodes = append(nodes, in)
		nodeSlots = append(nodeSlots, i)
	}
	a.target = &pb.NodeGroupTargetSizeResponse{TargetSize: clamp32(target)}
	a.nodes = &pb.NodeGroupNodesResponse{Instances: nodes}
	a.nodeSlots = nodeSlots
	a.entry = &pb.NodeGroup{
		Id:      g.Name,
		MinSize: clamp32(g.Spec.MinSize),
		MaxSize: clamp32(st.MaxSize(g.Name)),
		Debug:   fmt.Sprintf("claimstream group %s: target=%d live=%d free=%d slots=%d", g.Name, target, live, free, len(g.Slots)),
	}
	return a
}

// instanceFields are what NodeGroupNodes reports of one slot.
type instanceFields struct {
	id     string
	state  pb.InstanceStatus_InstanceState
	failed bool
	code   string
	msg    string
	class  int32
}

// instanceOf is the instance reported for slot (live its live claim, or
// nil): one per slot with a live claim or a recent failure not yet deleted
// (projections.ListedFailure); the id is the providerID of the slot's
// machine (the one its startup Job reported, else the declared one). until
// is when the report changes with time alone (a listed failure's window
// ends; zero: never); ok is false when the slot is not reported.
func instanceOf(st *projections.State, slot string, live *projections.Claim, now time.Time) (in instanceFields, until time.Time, ok bool) {
	sl := st.Slots[slot]
	if sl == nil || sl.Retired {
		return in, until, false
	}
	if live != nil {
		in = instanceFields{id: sl.CurrentProviderID(), state: pb.InstanceStatus_instanceCreating}
		switch {
		case live.ScaleDown != nil:
			in.state = pb.InstanceStatus_instanceDeleting
		case live.Phase == projections.PhaseReady:
			in.state = pb.InstanceStatus_instanceRunning
		}
		return in, until, true
	}
	// A failed instance is listed until cluster-autoscaler deletes it
	// (FailedInstanceDeleted) or the failure window passes.
	c := st.ListedFailure(slot, now)
	if c == nil {
		return in, until, false
	}
	msg := c.Message
	if msg == "" {
		msg = fmt.Sprintf("claim %s failed: %s", c.Name, c.Reason)
	}
	// Listed while now - FinishedAt <= RecentFailureWindow.
	until = c.FinishedAt.Add(projections.RecentFailureWindow + time.Nanosecond)
	return instanceFields{
		id: sl.CurrentProviderID(), state: pb.InstanceStatus_instanceCreating,
		failed: true, code: orDefault(c.Reason, "ClaimFailed"), msg: msg, class: errorClass(c.Reason),
	}, until, true
}

func (f instanceFields) instance() *pb.Instance {
	st := &pb.InstanceStatus{InstanceState: f.state}
	if f.failed {
		st.ErrorInfo = &pb.InstanceErrorInfo{ErrorCode: f.code, ErrorMessage: f.msg, InstanceErrorClass: f.class}
	}
	return &pb.Instance{Id: f.id, Status: st}
}

// same tells whether in reports exactly f.
func (f instanceFields) same(in *pb.Instance) bool {
	if in.GetId() != f.id || in.GetStatus().GetInstanceState() != f.state {
		return false
	}
	ei := in.GetStatus().GetErrorInfo()
	if !f.failed {
		return ei == nil
	}
	return ei != nil && ei.GetErrorCode() == f.code && ei.GetErrorMessage() == f.msg && ei.GetInstanceErrorClass() == f.class
}
