package provider

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a pool on a real embedded JetStream store, the provider on it, and
// a real gRPC server on a loopback port with a client connected.
type env struct {
	t   testing.TB
	h   *handlerstest.Harness
	srv *Server
	cc  *grpc.ClientConn
	c   pb.CloudProviderClient
}

func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	h := handlerstest.New(t)
	if opts.Logger == nil {
		opts.Logger = discard
	}
	srv := New(h.Views, h.Service, h.Clock, opts)
	gs, err := NewGRPCServer(srv, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, lis, gs, time.Second) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &env{t: t, h: h, srv: srv, cc: cc, c: pb.NewCloudProviderClient(cc)}
}

// ctx is the 5s budget cluster-autoscaler gives every RPC.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

type slotDecl struct {
	name string
	spec events.SlotSpec
}

// declare writes a group and slots with full specs (the harness's Declare
// gives slots only a providerID).
func declare(t testing.TB, h *handlerstest.Harness, group string, spec events.GroupSpec, slots ...slotDecl) {
	t.Helper()
	if spec.Scaler == "" {
		spec.Scaler = events.ScalerClusterAutoscaler
	}
	now := h.Clock.Now().UTC()
	ws := []events.Write{{Aggregate: events.GroupAggregate(group), Events: []events.Event{{Time: now, Data: events.GroupDeclared{Ref: events.Ref{Group: group, Cause: "test"}, Spec: spec}}}}}
	for _, sl := range slots {
		if sl.spec.ProviderID == "" {
			sl.spec.ProviderID = "homelab://" + sl.name
		}
		ws = append(ws, events.Write{Aggregate: events.SlotAggregate(sl.name), Events: []events.Event{{Time: now, Data: events.SlotDeclared{Ref: events.Ref{Slot: sl.name, Group: group, Cause: "test"}, Spec: sl.spec}}}})
	}
	res, err := h.Store.AppendWrites(context.Background(), ws...)
	if err != nil {
		t.Fatalf("declare %s: %v", group, err)
	}
	if err := h.Views.WaitFor(context.Background(), res.Last); err != nil {
		t.Fatal(err)
	}
}

// liveOf is the live claim of a slot ("" when none).
func liveOf(h *handlerstest.Harness, slot string) string {
	var name string
	h.Read(func(s *projections.State) {
		if c := s.LiveOfSlot(slot); c != nil {
			name = c.Name
		}
	})
	return name
}

func mustLive(t testing.TB, h *handlerstest.Harness, slot string) string {
	t.Helper()
	c := liveOf(h, slot)
	if c == "" {
		t.Fatalf("slot %s has no live claim", slot)
	}
	return c
}

// claimSlot makes a claim on exactly this slot.
func claimSlot(t testing.TB, h *handlerstest.Harness, slot string) string {
	t.Helper()
	h.MustExec(decide.ManualClaim{Slot: slot, By: "test"})
	return mustLive(t, h, slot)
}

func boot(t testing.TB, h *handlerstest.Harness, slot string) string {
	t.Helper()
	c := claimSlot(t, h, slot)
	h.MustExec(decide.BootClaim{Claim: c})
	return c
}

func ready(t testing.TB, h *handlerstest.Harness, slot string) string {
	t.Helper()
	c := boot(t, h, slot)
	h.MustExec(decide.MarkReady{Claim: c, Node: slot})
	return c
}

func targetSize(t testing.TB, e *env, group string) int32 {
	t.Helper()
	r, err := e.c.NodeGroupTargetSize(e.ctx(), &pb.NodeGroupTargetSizeRequest{Id: group})
	if err != nil {
		t.Fatalf("TargetSize(%s): %v", group, err)
	}
	return r.GetTargetSize()
}

// wantCode fails unless err is a status with code and a message holding
// every one of parts.
func wantCode(t testing.TB, err error, code codes.Code, parts ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v (%v), want code %v", status.Code(err), err, code)
	}
	msg := status.Convert(err).Message()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("message %q does not mention %q", msg, p)
		}
	}
}

func slotsNamed(names ...string) []slotDecl {
	out := make([]slotDecl, len(names))
	for i, n := range names {
		out[i] = slotDecl{name: n}
	}
	return out
}
