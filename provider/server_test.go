package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

func TestNodeGroups(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{MinSize: 1}, slotsNamed("w-0", "w-1", "w-2")...)
	declare(t, e.h, "gpu", events.GroupSpec{MaxSize: 1}, slotsNamed("g-0", "g-1")...)
	declare(t, e.h, "bi", events.GroupSpec{Scaler: events.ScalerBuiltin}, slotsNamed("b-0")...)
	ready(t, e.h, "w-0")

	r, err := e.c.NodeGroups(e.ctx(), &pb.NodeGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range r.GetNodeGroups() {
		got = append(got, fmt.Sprintf("%s:%d-%d", g.GetId(), g.GetMinSize(), g.GetMaxSize()))
	}
	if want := "gpu:0-1 workers:1-3"; strings.Join(got, " ") != want {
		t.Fatalf("NodeGroups = %v, want %s (builtin group invisible)", got, want)
	}
	if d := r.GetNodeGroups()[1].GetDebug(); !strings.Contains(d, "target=1 live=1 free=2") {
		t.Errorf("debug = %q", d)
	}
}

func TestNodeGroupForNode(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{MinSize: 1}, slotsNamed("w-0", "w-1")...)
	declare(t, e.h, "bi", events.GroupSpec{Scaler: events.ScalerBuiltin}, slotsNamed("b-0")...)
	declare(t, e.h, "custom", events.GroupSpec{}, slotDecl{name: "c-0", spec: events.SlotSpec{ProviderID: "ipmi://rack1/7"}})

	for _, c := range []struct {
		name, providerID, want string
	}{
		{"w-0", "homelab://w-0", "workers"},
		{"renamed", "homelab://w-1", "workers"}, // providerID first
		{"w-1", "", "workers"},                  // then name
		{"homelab://w-1", "homelab://w-1", "workers"},
		{"c-0", "ipmi://rack1/7", "custom"},
		{"some-node", "aws:///i-123", ""}, // not autoscaled
		{"b-0", "homelab://b-0", ""},      // builtin: invisible
		{"", "", ""},
	} {
		r, err := e.c.NodeGroupForNode(e.ctx(), &pb.NodeGroupForNodeRequest{Node: &pb.ExternalGrpcNode{Name: c.name, ProviderID: c.providerID}})
		if err != nil {
			t.Fatalf("%s/%s: %v", c.name, c.providerID, err)
		}
		if got := r.GetNodeGroup().GetId(); got != c.want {
			t.Errorf("NodeGroupForNode(%q, %q) = %q, want %q", c.name, c.providerID, got, c.want)
		}
		if c.want == "workers" && (r.GetNodeGroup().GetMinSize() != 1 || r.GetNodeGroup().GetMaxSize() != 2) {
			t.Errorf("group sizes = %v", r.GetNodeGroup())
		}
	}
	_, err := e.c.NodeGroupForNode(e.ctx(), &pb.NodeGroupForNodeRequest{})
	wantCode(t, err, codes.InvalidArgument, "node")
}

func TestTargetSizeUnknownGroups(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed("w-0")...)
	declare(t, e.h, "bi", events.GroupSpec{Scaler: events.ScalerBuiltin}, slotsNamed("b-0")...)
	if got := targetSize(t, e, "workers"); got != 0 {
		t.Fatalf("target = %d", got)
	}
	for _, id := range []string{"", "nope", "bi"} {
		_, err := e.c.NodeGroupTargetSize(e.ctx(), &pb.NodeGroupTargetSizeRequest{Id: id})
		wantCode(t, err, codes.NotFound, fmt.Sprintf("node group %q not found", id))
	}
	// Every group-scoped RPC says the same for an unknown or builtin group.
	ctx := e.ctx()
	for name, call := range map[string]func(id string) error{
		"IncreaseSize": func(id string) error {
			_, err := e.c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: id, Delta: 1})
			return err
		},
		"DecreaseTargetSize": func(id string) error {
			_, err := e.c.NodeGroupDecreaseTargetSize(ctx, &pb.NodeGroupDecreaseTargetSizeRequest{Id: id, Delta: -1})
			return err
		},
		"DeleteNodes": func(id string) error {
			_, err := e.c.NodeGroupDeleteNodes(ctx, &pb.NodeGroupDeleteNodesRequest{Id: id, Nodes: []*pb.ExternalGrpcNode{{Name: "b-0"}}})
			return err
		},
		"Nodes": func(id string) error {
			_, err := e.c.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: id})
			return err
		},
		"TemplateNodeInfo": func(id string) error {
			_, err := e.c.NodeGroupTemplateNodeInfo(ctx, &pb.NodeGroupTemplateNodeInfoRequest{Id: id})
			return err
		},
		"GetOptions": func(id string) error {
			_, err := e.c.NodeGroupGetOptions(ctx, &pb.NodeGroupAutoscalingOptionsRequest{Id: id})
			return err
		},
	} {
		for _, id := range []string{"", "nope", "bi"} {
			t.Run(name+"/"+id, func(t *testing.T) {
				wantCode(t, call(id), codes.NotFound, fmt.Sprintf("node group %q not found", id))
			})
		}
	}
	// Nothing was written to the builtin group.
	e.h.Read(func(s *projections.State) {
		if n := len(s.LiveClaims("bi")); n != 0 {
			t.Errorf("builtin group got %d claims through the provider", n)
		}
	})
}

func TestIncreaseSize(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed("w-0", "w-1", "w-2")...)

	if _, err := e.c.NodeGroupIncreaseSize(e.ctx(), &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 2}); err != nil {
		t.Fatal(err)
	}
	if got := targetSize(t, e, "workers"); got != 2 {
		t.Fatalf("target after +2 = %d", got)
	}
	e.h.Read(func(s *projections.State) {
		for _, c := range s.LiveClaims("workers") {
			if c.RequestedBy != DefaultRequestedBy || c.Request.Call != events.CallIncreaseSize {
				t.Errorf("claim %s requested by %q call %q", c.Name, c.RequestedBy, c.Request.Call)
			}
		}
	})
	for _, d := range []int32{0, -1} {
		_, err := e.c.NodeGroupIncreaseSize(e.ctx(), &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: d})
		wantCode(t, err, codes.InvalidArgument, "delta")
	}
	_, err := e.c.NodeGroupIncreaseSize(e.ctx(), &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 2})
	wantCode(t, err, codes.FailedPrecondition, "maxSize 3")
	_, err = e.c.NodeGroupIncreaseSize(e.ctx(), &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1 << 30})
	wantCode(t, err, codes.FailedPrecondition, "maxSize")
	if got := targetSize(t, e, "workers"); got != 2 {
		t.Fatalf("a refused increase changed the target: %d", got)
	}
}

func TestDeleteNodes(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{MinSize: 1}, slotsNamed("w-0", "w-1", "w-2")...)
	declare(t, e.h, "other", events.GroupSpec{}, slotsNamed("o-0")...)
	ready(t, e.h, "w-0")
	booting := boot(t, e.h, "w-1")
	claimSlot(t, e.h, "w-2")
	if got := targetSize(t, e, "workers"); got != 3 {
		t.Fatalf("target = %d", got)
	}
	del := func(nodes ...*pb.ExternalGrpcNode) error {
		_, err := e.c.NodeGroupDeleteNodes(e.ctx(), &pb.NodeGroupDeleteNodesRequest{Id: "workers", Nodes: nodes})
		return err
	}

	// A ready node: marked for scale-down, and the target drops on the very
	// write that marks it (no waiting).
	if err := del(&pb.ExternalGrpcNode{Name: "w-0", ProviderID: "homelab://w-0"}); err != nil {
		t.Fatal(err)
	}
	if got := targetSize(t, e, "workers"); got != 2 {
		t.Fatalf("target right after DeleteNodes = %d, want 2", got)
	}
	// A fake node of an unregistered instance (name = providerID): the
	// pending claim is cancelled.
	if err := del(&pb.ExternalGrpcNode{Name: "homelab://w-2", ProviderID: "homelab://w-2"}); err != nil {
		t.Fatal(err)
	}
	if got := targetSize(t, e, "workers"); got != 1 {
		t.Fatalf("target = %d, want 1", got)
	}
	// Idempotent.
	if err := del(&pb.ExternalGrpcNode{Name: "w-0", ProviderID: "homelab://w-0"}, &pb.ExternalGrpcNode{Name: "w-2"}); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	// The floor.
	wantCode(t, del(&pb.ExternalGrpcNode{Name: "w-1"}), codes.FailedPrecondition, "minSize 1")
	// Bad requests.
	wantCode(t, del(), codes.InvalidArgument, "nodes")
	wantCode(t, del(&pb.ExternalGrpcNode{}), codes.InvalidArgument, "nodes[0]")
	wantCode(t, del(&pb.ExternalGrpcNode{Name: "ghost", ProviderID: "homelab://ghost"}), codes.NotFound, "ghost")
	wantCode(t, del(&pb.ExternalGrpcNode{Name: "o-0"}), codes.InvalidArgument, "other")

	// The booting claim is still there; after it fails the group is under
	// its floor, and cluster-autoscaler's delete of the failed instance is
	// still a success (nothing is taken away).
	e.h.MustExec(decide.FailClaim{Claim: booting, Reason: projections.ReasonStartupJobFailed, Message: "exit 1"})
	if got := targetSize(t, e, "workers"); got != 0 {
		t.Fatalf("target after the failure = %d", got)
	}
	if err := del(&pb.ExternalGrpcNode{Name: "homelab://w-1", ProviderID: "homelab://w-1"}); err != nil {
		t.Fatalf("delete of a failed instance under minSize: %v", err)
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{MinSize: 1}, slotsNamed("w-0", "w-1", "w-2", "w-3")...)
	dec := func(d int32) error {
		_, err := e.c.NodeGroupDecreaseTargetSize(e.ctx(), &pb.NodeGroupDecreaseTargetSizeRequest{Id: "workers", Delta: d})
		return err
	}
	for _, d := range []int32{0, 1} {
		wantCode(t, dec(d), codes.InvalidArgument, "delta")
	}
	// No live claim: already at the size asked for.
	if err := dec(-1); err != nil {
		t.Fatalf("decrease of an empty group: %v", err)
	}
	ready(t, e.h, "w-0")
	boot(t, e.h, "w-1")
	if _, err := e.c.NodeGroupIncreaseSize(e.ctx(), &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 2}); err != nil {
		t.Fatal(err)
	}
	if got := targetSize(t, e, "workers"); got != 4 {
		t.Fatalf("target = %d", got)
	}
	// Under the floor: FailedPrecondition, not retryable.
	wantCode(t, dec(-4), codes.FailedPrecondition, "minSize 1")
	// Two pending claims cancel.
	if err := dec(-2); err != nil {
		t.Fatal(err)
	}
	if got := targetSize(t, e, "workers"); got != 2 {
		t.Fatalf("target after -2 = %d", got)
	}
	// Nothing cancelable left: Unavailable naming the counts.
	wantCode(t, dec(-1), codes.Unavailable, "1 booting", "1 ready")
	if got := targetSize(t, e, "workers"); got != 2 {
		t.Fatalf("an Unavailable decrease changed the target: %d", got)
	}
}

func TestNodeGroupNodes(t *testing.T) {
	e := newEnv(t, Options{})
	names := []string{"n-0", "n-1", "n-2", "n-3", "n-4", "n-5", "n-6", "n-7"}
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed(names...)...)

	// n-7: failed long ago, no longer reported.
	old := boot(t, e.h, "n-7")
	e.h.MustExec(decide.FailClaim{Claim: old, Reason: projections.ReasonJobTimeout, Message: "old"})
	e.h.Clock.Step(projections.RecentFailureWindow + time.Second)

	claimSlot(t, e.h, "n-0") // pending
	boot(t, e.h, "n-1")      // booting
	ready(t, e.h, "n-2")     // running
	ready(t, e.h, "n-3")     // marked: deleting
	if _, err := e.c.NodeGroupDeleteNodes(e.ctx(), &pb.NodeGroupDeleteNodesRequest{Id: "workers", Nodes: []*pb.ExternalGrpcNode{{Name: "n-3"}}}); err != nil {
		t.Fatal(err)
	}
	before := targetSize(t, e, "workers")
	f4 := boot(t, e.h, "n-4")
	e.h.MustExec(decide.FailClaim{Claim: f4, Reason: projections.ReasonStartupJobFailed, Message: "startup job n-4 exited 1"})
	f5 := ready(t, e.h, "n-5")
	e.h.MustExec(decide.FailClaim{Claim: f5, Reason: projections.ReasonMachineGone})
	// n-6: never claimed, not reported.

	// A failed claim stops being counted at once.
	if got := targetSize(t, e, "workers"); got != before {
		t.Fatalf("target = %d, want %d (failed claims are not counted)", got, before)
	}

	r, err := e.c.NodeGroupNodes(e.ctx(), &pb.NodeGroupNodesRequest{Id: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, in := range r.GetInstances() {
		s := in.GetStatus().GetInstanceState().String()
		if ei := in.GetStatus().GetErrorInfo(); ei != nil {
			s += fmt.Sprintf("/%s/%d/%s", ei.GetErrorCode(), ei.GetInstanceErrorClass(), ei.GetErrorMessage())
		}
		got[in.GetId()] = s
	}
	want := map[string]string{
		"homelab://n-0": "instanceCreating",
		"homelab://n-1": "instanceCreating",
		"homelab://n-2": "instanceRunning",
		"homelab://n-3": "instanceDeleting",
		"homelab://n-4": "instanceCreating/StartupJobFailed/1/startup job n-4 exited 1",
		"homelab://n-5": "instanceCreating/MachineGone/99/claim " + f5 + " failed: MachineGone",
	}
	if len(got) != len(want) {
		t.Errorf("instances = %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s = %q, want %q", id, got[id], w)
		}
	}
	// Past the window the failures are no longer reported.
	e.h.Clock.Step(projections.RecentFailureWindow + time.Second)
	r, err = e.c.NodeGroupNodes(e.ctx(), &pb.NodeGroupNodesRequest{Id: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.GetInstances()); n != 4 {
		t.Errorf("after the failure window: %d instances, want 4", n)
	}
}

func TestErrorClass(t *testing.T) {
	for _, r := range []string{projections.ReasonDeadlineExceeded, projections.ReasonStartupJobFailed, projections.ReasonJobTimeout, projections.ReasonReadinessGateTimeout, projections.ReasonAttemptLimitReached} {
		if errorClass(r) != ErrorClassOutOfResources {
			t.Errorf("%s: class %d", r, errorClass(r))
		}
	}
	for _, r := range []string{projections.ReasonMachineGone, projections.ReasonHostLost, "Whatever"} {
		if errorClass(r) != ErrorClassOther {
			t.Errorf("%s: class %d", r, errorClass(r))
		}
	}
}

func TestErrorMapping(t *testing.T) {
	for c, want := range map[decide.Code]codes.Code{
		decide.CodeInvalidArgument:    codes.InvalidArgument,
		decide.CodeNotFound:           codes.NotFound,
		decide.CodeFailedPrecondition: codes.FailedPrecondition,
		decide.CodeUnavailable:        codes.Unavailable,
		decide.CodeAborted:            codes.Aborted,
		decide.Code(42):               codes.Internal,
	} {
		err := toStatus("Op", "g", fmt.Errorf("wrapped: %w", &decide.Error{Code: c, Msg: "the message"}))
		if status.Code(err) != want {
			t.Errorf("%v -> %v, want %v", c, status.Code(err), want)
		}
	}
	err := toStatus("NodeGroupIncreaseSize", "workers", errors.New("disk on fire"))
	wantCode(t, err, codes.Internal, "NodeGroupIncreaseSize", "workers", "disk on fire")
	wantCode(t, toStatus("Op", "g", fmt.Errorf("x: %w", context.DeadlineExceeded)), codes.DeadlineExceeded)
	wantCode(t, toStatus("Op", "g", context.Canceled), codes.Canceled)
	if toStatus("Op", "g", nil) != nil {
		t.Error("nil error mapped to non-nil")
	}
}

func TestMiscRPCs(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := e.ctx()
	l, err := e.c.GPULabel(ctx, &pb.GPULabelRequest{})
	if err != nil || l.GetLabel() != DefaultGPULabel {
		t.Fatalf("GPULabel = %v, %v", l, err)
	}
	gt, err := e.c.GetAvailableGPUTypes(ctx, &pb.GetAvailableGPUTypesRequest{})
	if err != nil || len(gt.GetGpuTypes()) != 0 {
		t.Fatalf("GetAvailableGPUTypes = %v, %v", gt, err)
	}
	if _, err := e.c.Cleanup(ctx, &pb.CleanupRequest{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := e.c.Refresh(ctx, &pb.RefreshRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	srv := New(e.h.Views, e.h.Service, e.h.Clock, Options{GPULabel: "nvidia.com/gpu.present", Logger: discard})
	if l, _ := srv.GPULabel(ctx, &pb.GPULabelRequest{}); l.GetLabel() != "nvidia.com/gpu.present" {
		t.Errorf("configured label = %q", l.GetLabel())
	}
}
