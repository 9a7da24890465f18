package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// A reader that holds the views' lock for long (a reactor's scan, the
// dashboard) with an event waiting to be folded behind it must not hold up
// cluster-autoscaler's reads: with the views' RWMutex a waiting writer
// blocks every new reader, so a read took as long as the slow reader plus
// the fold. They now answer at once from the views as they were before the
// pending event, and the event is in the very next read once it is folded.
func TestReadsNotDelayedByAHeldViewsLock(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed("w-0", "w-1", "w-2")...)
	ctx := e.ctx()
	e.h.MustExec(decide.IncreaseSize{Group: "workers", Delta: 1, RequestedBy: "test"})

	// The slow reader holds the read lock until the reads below are done
	// (at most 3 s).
	entered, done, released := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(released)
		e.h.Views.Read(func(*projections.State) {
			close(entered)
			select {
			case <-done:
			case <-time.After(3 * time.Second):
			}
		})
	}()
	<-entered
	// A write behind it: its fold (and its command's wait for the views)
	// queue for the write lock.
	written := make(chan error, 1)
	go func() {
		_, err := e.h.Service.Execute(ctx, decide.IncreaseSize{Group: "workers", Delta: 1, RequestedBy: "test"})
		written <- err
	}()
	waitForPendingViewsWriter(t)

	reads := map[string]func() error{
		"NodeGroupTargetSize": func() error {
			r, err := e.srv.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "workers"})
			if err == nil && r.GetTargetSize() != 1 {
				err = fmt.Errorf("target size %d, want 1 (the pending event is not folded yet)", r.GetTargetSize())
			}
			return err
		},
		"NodeGroupNodes": func() error {
			r, err := e.srv.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: "workers"})
			if err == nil && len(r.GetInstances()) != 1 {
				err = fmt.Errorf("%d instances, want 1", len(r.GetInstances()))
			}
			return err
		},
		"NodeGroups": func() error {
			_, err := e.srv.NodeGroups(ctx, &pb.NodeGroupsRequest{})
			return err
		},
	}
	for _, name := range slices.Sorted(maps.Keys(reads)) {
		began := time.Now()
		err := reads[name]()
		if took := time.Since(began); took > 500*time.Millisecond {
			t.Errorf("%s took %s while a reader held the views' lock with a fold waiting", name, took.Round(time.Millisecond))
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	close(done)
	<-released
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	// Read your writes: the command returned once the views had its event.
	if got := targetSize(t, e, "workers"); got != 2 {
		t.Errorf("TargetSize after the write = %d, want 2", got)
	}
}

// waitForPendingViewsWriter waits until a goroutine waits for the views'
// write lock (the fold, or a command waiting for the views).
func waitForPendingViewsWriter(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	eventstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "sync.(*RWMutex).Lock") && strings.Contains(g, "projections.(*Runner)") {
				return nil
			}
		}
		return errors.New("no writer queued for the views' lock")
	})
}

// After every change of the views (claims through their lifecycle, a
// failure listed then deleted, a slot moved to another group, a group no
// longer cluster-autoscaler's, a retired group, time passing the failure
// window and a resting slot's pause), the published answers equal what the
// views answer directly under their lock.
func TestPublishedReadsMatchTheViews(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := e.ctx()
	declare(t, e.h, "a", events.GroupSpec{MinSize: 1}, slotsNamed("a-0", "a-1", "a-2")...)
	declare(t, e.h, "b", events.GroupSpec{MaxSize: 1}, slotsNamed("b-0", "b-1")...)
	declare(t, e.h, "c", events.GroupSpec{}, slotsNamed("c-0")...)
	check := func(step string) {
		t.Helper()
		compareWithViews(t, e, step)
	}
	check("declared")
	e.h.MustExec(decide.IncreaseSize{Group: "a", Delta: 2, RequestedBy: "test"})
	check("increase a")
	ready(t, e.h, "b-0")
	check("b-0 ready")
	c := boot(t, e.h, "a-2")
	e.h.MustExec(decide.FailClaim{Claim: c, Reason: projections.ReasonStartupJobFailed})
	if live := liveOf(e.h, "a-2"); live != "" {
		e.h.MustExec(decide.CompleteClaim{Claim: live, Reason: projections.ReasonStartupJobFailed})
	}
	check("a-2 failed")
	e.h.MustExec(decide.DeleteNodes{Group: "b", Nodes: []decide.NodeRef{{Name: "b-0"}}, RequestedBy: "test"})
	check("b-0 marked for scale-down")

	// b-1 moves to group c.
	var slotSeq, groupSeq uint64
	e.h.Read(func(s *projections.State) { slotSeq, groupSeq = s.Slots["b-1"].Seq, s.Groups["c"].Seq })
	appendAndWait(t, e, events.SlotAggregate("b-1"), slotSeq, events.SlotChanged{Ref: events.Ref{Slot: "b-1", Group: "c", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://b-1"}})
	check("b-1 moved to c")
	// c becomes the built-in scaler's: not served any more.
	appendAndWait(t, e, events.GroupAggregate("c"), groupSeq, events.GroupChanged{Ref: events.Ref{Group: "c", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerBuiltin}})
	check("c not served")
	if _, err := e.srv.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "c"}); err == nil {
		t.Error("TargetSize of a group served to another scaler answered")
	}

	// Time alone: the failure leaves the list after its window.
	e.h.Clock.Step(projections.RecentFailureWindow + time.Second)
	check("failure window passed")
	e.h.Clock.Step(-(projections.RecentFailureWindow + time.Second))
	check("clock set back")
	e.h.Clock.Step(projections.RecentFailureWindow + time.Second)

	e.h.Read(func(s *projections.State) { groupSeq = s.Groups["b"].Seq })
	appendAndWait(t, e, events.GroupAggregate("b"), groupSeq, events.GroupRetired{Ref: events.Ref{Group: "b", Cause: "test"}})
	check("b retired")
}

func appendAndWait(t *testing.T, e *env, agg events.Aggregate, expected uint64, d events.Data) {
	t.Helper()
	res, err := e.h.Store.Append(context.Background(), agg, expected, events.Event{Time: e.h.Clock.Now().UTC(), Data: d})
	if err != nil {
		t.Fatalf("append %T: %v", d, err)
	}
	if err := e.h.Views.WaitFor(context.Background(), res.Last); err != nil {
		t.Fatal(err)
	}
}

// compareWithViews asks the three reads of every group the views know (and
// one they do not) and compares each answer with the one computed from the
// views under their lock, as the provider did before it published answers.
func compareWithViews(t *testing.T, e *env, step string) {
	t.Helper()
	ctx := e.ctx()
	now := e.h.Clock.Now()
	var groups []string
	want := map[string]*pb.NodeGroupNodesResponse{}
	wantTarget := map[string]int32{}
	var wantList []*pb.NodeGroup
	e.h.Read(func(st *projections.State) {
		for name, g := range st.Groups {
			groups = append(groups, name)
			if g.Retired || !ServesCA(g) {
				continue
			}
			want[name] = &pb.NodeGroupNodesResponse{Instances: viewsInstances(st, g, now)}
			wantTarget[name] = clamp32(st.TargetSize(name))
		}
		for _, name := range slices.Sorted(maps.Keys(want)) {
			ng, _ := e.srv.nodeGroup(st, st.Groups[name], now)
			wantList = append(wantList, ng)
		}
	})
	groups = append(groups, "unknown")
	for _, g := range groups {
		nodes, err := e.srv.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: g})
		target, terr := e.srv.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: g})
		w, served := want[g]
		switch {
		case !served:
			if err == nil || terr == nil || !strings.Contains(err.Error(), "not found") {
				t.Errorf("%s: group %s not served: NodeGroupNodes %v, TargetSize %v", step, g, err, terr)
			}
		case err != nil || terr != nil:
			t.Errorf("%s: group %s: %v, %v", step, g, err, terr)
		default:
			if !proto.Equal(nodes, w) {
				t.Errorf("%s: NodeGroupNodes(%s) = %v, the views say %v", step, g, nodes, w)
			}
			if target.GetTargetSize() != wantTarget[g] {
				t.Errorf("%s: TargetSize(%s) = %d, the views say %d", step, g, target.GetTargetSize(), wantTarget[g])
			}
		}
	}
	list, err := e.srv.NodeGroups(ctx, &pb.NodeGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(list, &pb.NodeGroupsResponse{NodeGroups: wantList}) {
		t.Errorf("%s: NodeGroups = %v, the views say %v", step, list.GetNodeGroups(), wantList)
	}
}

// viewsInstances is NodeGroupNodes as it was computed under the views'
// lock: the reference the published answers must equal.
func viewsInstances(st *projections.State, g *projections.Group, now time.Time) []*pb.Instance {
	out := make([]*pb.Instance, 0, len(g.Slots))
	for _, name := range g.Slots {
		sl := st.Slots[name]
		if sl == nil || sl.Retired {
			continue
		}
		if c := st.LiveOfSlot(name); c != nil {
			state := pb.InstanceStatus_instanceCreating
			switch {
			case c.ScaleDown != nil:
				state = pb.InstanceStatus_instanceDeleting
			case c.Phase == projections.PhaseReady:
				state = pb.InstanceStatus_instanceRunning
			}
			out = append(out, &pb.Instance{Id: sl.CurrentProviderID(), Status: &pb.InstanceStatus{InstanceState: state}})
			continue
		}
		c := st.ListedFailure(name, now)
		if c == nil {
			continue
		}
		msg := c.Message
		if msg == "" {
			msg = fmt.Sprintf("claim %s failed: %s", c.Name, c.Reason)
		}
		out = append(out, &pb.Instance{Id: sl.CurrentProviderID(), Status: &pb.InstanceStatus{
			InstanceState: pb.InstanceStatus_instanceCreating,
			ErrorInfo: &pb.InstanceErrorInfo{
				ErrorCode:          orDefault(c.Reason, "ClaimFailed"),
				ErrorMessage:       msg,
				InstanceErrorClass: errorClass(c.Reason),
			},
		}})
	}
	return out
}

// An event of one slot computes that slot's share of its group's answers
// again and reuses the other slots' (the fold of a 500-slot group under
// churn must not walk all 500 slots per event); the answers still equal the
// views'.
func TestAnEventOfOneSlotRecomputesOnlyThatSlot(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "a", events.GroupSpec{}, slotsNamed("a-0", "a-1", "a-2")...)
	c := claimSlot(t, e.h, "a-1")
	before := e.srv.reads.cur.Load().groups["a"]
	e.h.MustExec(decide.BootClaim{Claim: c})
	after := e.srv.reads.cur.Load().groups["a"]
	for i, name := range after.slots {
		reused := after.shares[i] == before.shares[i]
		if name == "a-1" && reused {
			t.Errorf("a-1's share was not computed again after its claim booted")
		}
		if name != "a-1" && !reused {
			t.Errorf("%s's share was computed again after an event of a-1", name)
		}
	}
	compareWithViews(t, e, "a-1 booting")
}

// Reads running alongside folds and a clock that moves (answers rebuilt on
// the read path and by the fold's hook at once) never see a write go
// backwards: a TargetSize read after IncreaseSize returned counts it, and
// later reads never count less. Run with -race.
func TestReadsAlongsideFoldsNeverGoBack(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "a", events.GroupSpec{}, slotsNamed("a-0", "a-1", "a-2", "a-3", "a-4", "a-5")...)
	ctx := e.ctx()
	var written atomic.Int32 // claims whose IncreaseSize returned
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				least := written.Load()
				r, err := e.srv.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "a"})
				if err != nil || r.GetTargetSize() < least {
					t.Errorf("TargetSize = %d (%v) after %d claims were written", r.GetTargetSize(), err, least)
					return
				}
				if _, err := e.srv.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: "a"}); err != nil {
					t.Error(err)
					return
				}
				if _, err := e.srv.NodeGroups(ctx, &pb.NodeGroupsRequest{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 6 {
		e.h.MustExec(decide.IncreaseSize{Group: "a", Delta: 1, RequestedBy: "test"})
		written.Store(int32(i + 1))
		e.h.Clock.Step(time.Second)
	}
	close(stop)
	wg.Wait()
	compareWithViews(t, e, "after the writes")
}
