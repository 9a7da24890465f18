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
// back), is answered from the views under their lock and publishes the
// rebuilt answers for the next reads.
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
	groups map[string]*groupAnswers // served, active groups; any other is NotFound
	names  []string                 // sorted keys of groups
	list   *pb.NodeGroupsResponse
	// latest is the newest build instant among groups, listUntil the
	// soonest instant a NodeGroups entry changes with time (zero: never).
	latest    time.Time
	listUntil time.Time
}

// groupAnswers are one group's answers, good from builtAt on (until the
// soonest of its untils), with what each slot adds to them so that an event
// of one slot recomputes that slot only.
type groupAnswers struct {
	builtAt time.Time
	target  *pb.NodeGroupTargetSizeResponse
	nodes   *pb.NodeGroupNodesResponse
	entry   *pb.NodeGroup
	// nodesUntil and entryUntil: when the instances, the entry, change
	// with time alone (zero: never).
	nodesUntil time.Time
	entryUntil time.Time

	// The inputs: the group's slots (sorted, as Group.Slots) and spec
	// bounds at the build, and each slot's share, in the slots' order.
	// Shared between snapshots; never changed once published.
	slots            []string
	minSize, maxSize int
	shares           []*slotShare
}

// slotShare is what one slot adds to its group's answers at a given time.
type slotShare struct {
	live, wantsMachine, free, inService bool
	restEnds                            time.Time // the slot is resting until then (zero: not)
	instance                            *pb.Instance
	instanceUntil                       time.Time // a listed failure's window ends (zero: never)
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
		r.cur.Store(r.assemble(st, now, nil, nil, "", nil))
		return
	}
	r.cur.Store(r.assemble(st, now, prev, touched, e.Data.Reference().Slot, nil))
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
// touched, or every group when prev is nil, are built again (only slot's
// share when the event named a slot and nothing else of the group
// changed), and so are the groups stale says are (nil: none); the others
// are shared.
func (r *readSnapshots) assemble(st *projections.State, now time.Time, prev *readSnapshot, touched []string, slot string, stale func(*groupAnswers) bool) *readSnapshot {
	snap := &readSnapshot{}
	if prev == nil {
		snap.groups = make(map[string]*groupAnswers, len(st.Groups))
		for name, g := range st.Groups {
			if !g.Retired && r.serves(g) {
				snap.groups[name] = groupAnswersOf(st, g, now, nil, "")
			}
		}
	} else {
		snap.groups = maps.Clone(prev.groups)
		if snap.groups == nil {
			snap.groups = map[string]*groupAnswers{}
		}
		for _, name := range touched {
			if g, ok := st.ActiveGroup(name); ok && r.serves(g) {
				snap.groups[name] = groupAnswersOf(st, g, now, snap.groups[name], slot)
			} else {
				delete(snap.groups, name)
			}
		}
		if stale != nil {
			for name, a := range snap.groups {
				if stale(a) {
					snap.groups[name] = groupAnswersOf(st, st.Groups[name], now, a, "")
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

// current returns the published snapshot when good says the answers the
// caller needs hold at now; otherwise it builds the stale answers again from
// the views, under their read lock, and publishes them.
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
		snap = s.reads.assemble(st, now, base, nil, "", func(a *groupAnswers) bool { return !a.goodAt(now) })
		// Another reader may have published the same sequence meanwhile;
		// either copy is right, so losing the swap is fine.
		s.reads.cur.CompareAndSwap(base, snap)
	})
	return snap, now
}

// groupAnswersOf computes g's answers at now. When only slot's share can
// have changed since prev (the event named that slot, the group kept its
// slots and bounds, and prev is good at now), only that share is computed
// again; otherwise every slot's is, reusing prev's instances that did not
// change. The sums are those of State.TargetSize, LiveClaims, FreeSlots and
// MaxSize; the instances those of NodeGroupNodes (instanceOf).
func groupAnswersOf(st *projections.State, g *projections.Group, now time.Time, prev *groupAnswers, slot string) *groupAnswers {
	if prev != nil && slot != "" && prev.goodAt(now) && prev.minSize == g.Spec.MinSize && prev.maxSize == g.Spec.MaxSize && slices.Equal(prev.slots, g.Slots) {
		if i, ok := slices.BinarySearch(prev.slots, slot); ok {
			shares := slices.Clone(prev.shares)
			sh := slotShareOf(st, slot, now, prev.shares[i].instance)
			shares[i] = &sh
			return sumShares(g.Name, now, prev.slots, g.Spec, shares)
		}
	}
	shares := make([]*slotShare, len(g.Slots))
	backing := make([]slotShare, len(g.Slots)) // one allocation for the group
	for i, name := range g.Slots {
		var old *pb.Instance
		if prev != nil {
			if j, ok := slices.BinarySearch(prev.slots, name); ok {
				old = prev.shares[j].instance
			}
		}
		backing[i] = slotShareOf(st, name, now, old)
		shares[i] = &backing[i]
	}
	return sumShares(g.Name, now, slices.Clone(g.Slots), g.Spec, shares)
}

// slotShareOf is what slot adds to its group's answers at now; old is its
// instance in the previous answers, kept when nothing in it changed.
func slotShareOf(st *projections.State, slot string, now time.Time, old *pb.Instance) slotShare {
	var sh slotShare
	if sl := st.Slots[slot]; sl != nil && sl.Decommissioned == nil {
		sh.inService = true
	}
	c := st.LiveOfSlot(slot)
	switch {
	case c != nil:
		sh.live, sh.wantsMachine = true, c.WantsMachine()
	case st.IsFree(slot, now):
		sh.free = true
	default:
		sh.restEnds = restEnds(st, slot, now)
	}
	want, until, ok := instanceOf(st, slot, c, now)
	if !ok {
		return sh
	}
	sh.instanceUntil = until
	if old != nil && want.same(old) {
		sh.instance = old
	} else {
		sh.instance = want.instance()
	}
	return sh
}

// sumShares builds a group's answers from its slots' shares.
func sumShares(group string, now time.Time, slots []string, spec events.GroupSpec, shares []*slotShare) *groupAnswers {
	a := &groupAnswers{builtAt: now, slots: slots, minSize: spec.MinSize, maxSize: spec.MaxSize, shares: shares}
	var target, live, free, inService int
	nodes := make([]*pb.Instance, 0, len(shares))
	for _, sh := range shares {
		switch {
		case sh.live:
			live++
			if sh.wantsMachine {
				target++
			}
		case sh.free:
			free++
		default:
			a.entryUntil = earliest(a.entryUntil, sh.restEnds)
		}
		if sh.inService {
			inService++
		}
		if sh.instance != nil {
			nodes = append(nodes, sh.instance)
			a.nodesUntil = earliest(a.nodesUntil, sh.instanceUntil)
		}
	}
	maxSize := inService
	if spec.MaxSize > 0 && spec.MaxSize < inService {
		maxSize = spec.MaxSize
	}
	a.target = &pb.NodeGroupTargetSizeResponse{TargetSize: clamp32(target)}
	a.nodes = &pb.NodeGroupNodesResponse{Instances: nodes}
	a.entry = &pb.NodeGroup{
		Id:      group,
		MinSize: clamp32(spec.MinSize),
		MaxSize: clamp32(maxSize),
		Debug:   fmt.Sprintf("claimstream group %s: target=%d live=%d free=%d slots=%d", group, target, live, free, len(slots)),
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
