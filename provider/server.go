// Package provider serves cluster-autoscaler's externalgrpc cloud provider
// protocol (CA <= 1.34 and >= 1.35 layouts at once) from the in-memory
// views: every read answers from projections.State, every write goes through
// the deciders (handlers.Service). See docs/design.md.
package provider

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// DefaultGPULabel is the node label cluster-autoscaler is told marks GPU
// nodes when Options.GPULabel is empty.
const DefaultGPULabel = "claimstream.dev/gpu"

// DefaultRequestedBy is recorded on every claim and scale-down this
// provider asks for.
const DefaultRequestedBy = "cluster-autoscaler"

// Options configure a Server.
type Options struct {
	// Logger receives a line per refused write and per internal error
	// (default slog.Default()).
	Logger *slog.Logger
	// GPULabel is answered to GPULabel (default DefaultGPULabel).
	GPULabel string
	// RequestedBy is recorded on the claims and scale-downs the provider
	// asks for (default DefaultRequestedBy). When the caller presents a
	// verified client certificate its subject CN is appended.
	RequestedBy string
	// Serves selects the groups cluster-autoscaler may see and drive; any
	// other group answers NotFound and is not listed. Default: ServesCA.
	Serves func(*projections.Group) bool
	// LogHealth, when set, makes the gRPC health service answer NOT_SERVING
	// while the event log cannot be written.
	LogHealth *eventlog.LogHealth
}

// ServesCA is the default group filter: a group whose scaler is
// "cluster-autoscaler" (or empty: the pool file's default scaler).
func ServesCA(g *projections.Group) bool {
	return g.Spec.Scaler == events.ScalerClusterAutoscaler || g.Spec.Scaler == ""
}

// Server implements externalgrpcpb.CloudProviderServer.
type Server struct {
	pb.UnimplementedCloudProviderServer

	views *projections.Runner
	cmds  *handlers.Service
	clock clock.PassiveClock
	opts  Options
	log   *slog.Logger

	// reads answers NodeGroups, NodeGroupTargetSize and NodeGroupNodes
	// without the views' lock (readsnapshot.go).
	reads *readSnapshots
	// keys identify IncreaseSize calls among their retries (requestkey.go).
	keys *requestKeys
}

var _ pb.CloudProviderServer = (*Server)(nil)

// New returns a provider answering from views and writing through cmds.
// clk is the clock of "now" for the reads (recent failures, free slots);
// the commands use the service's own clock.
func New(views *projections.Runner, cmds *handlers.Service, clk clock.PassiveClock, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.GPULabel == "" {
		opts.GPULabel = DefaultGPULabel
	}
	if opts.RequestedBy == "" {
		opts.RequestedBy = DefaultRequestedBy
	}
	if opts.Serves == nil {
		opts.Serves = ServesCA
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	s := &Server{views: views, cmds: cmds, clock: clk, opts: opts, log: opts.Logger, reads: newReadSnapshots(opts.Serves, clk), keys: newRequestKeys(clk)}
	views.Publish(s.reads.publish)
	return s
}

// --- lookups -----------------------------------------------------------------

// group returns a declared, active group that cluster-autoscaler may see.
func (s *Server) group(st *projections.State, id string) (*projections.Group, error) {
	g, ok := st.ActiveGroup(id)
	if !ok || !s.opts.Serves(g) {
		return nil, notFound(id)
	}
	return g, nil
}

// notFound is the answer about a group that is not declared, is retired, or
// is not cluster-autoscaler's.
func notFound(id string) error {
	return status.Errorf(codes.NotFound, "node group %q not found", id)
}

// checkGroup tells whether a group is served, before a write.
func (s *Server) checkGroup(id string) error {
	var err error
	s.views.Read(func(st *projections.State) { _, err = s.group(st, id) })
	return err
}

// nodeGroup builds a group's entry, and tells when its free count next
// changes with time alone (zero: never).
func (s *Server) nodeGroup(st *projections.State, g *projections.Group, now time.Time) (*pb.NodeGroup, time.Time) {
	// One pass for the debug line: the same counts as State.TargetSize,
	// LiveClaims and FreeSlots.
	var target, live, free int
	var changes time.Time
	for _, name := range g.Slots {
		if c := st.LiveOfSlot(name); c != nil {
			live++
			if c.WantsMachine() {
				target++
			}
		} else if st.IsFree(name, now) {
			free++
		} else {
			changes = earliest(changes, restEnds(st, name, now))
		}
	}
	return &pb.NodeGroup{
		Id:      g.Name,
		MinSize: clamp32(g.Spec.MinSize),
		MaxSize: clamp32(st.MaxSize(g.Name)),
		Debug:   fmt.Sprintf("claimstream group %s: target=%d live=%d free=%d slots=%d", g.Name, target, live, free, len(g.Slots)),
	}, changes
}

// requester is who a write is recorded as asked by.
func (s *Server) requester(ctx context.Context) string {
	by := s.opts.RequestedBy
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return by
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		if cn := verifiedCN(ti.State.VerifiedChains); cn != "" {
			return by + " (cn=" + cn + ")"
		}
	}
	return by
}

func verifiedCN(chains [][]*x509.Certificate) string {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return ""
	}
	return chains[0][0].Subject.CommonName
}

// --- RPCs ----------------------------------------------------------------------

// NodeGroups lists every group cluster-autoscaler may drive, by name. The
// answer is built once per change of the views (readsnapshot.go), rebuilding
// only the groups an event touched, and shared by every caller until then:
// callers must not change it.
func (s *Server) NodeGroups(_ context.Context, _ *pb.NodeGroupsRequest) (*pb.NodeGroupsResponse, error) {
	snap, _ := s.current(func(snap *readSnapshot, now time.Time) bool { return snap.listGoodAt(now) })
	return snap.list, nil
}

// NodeGroupForNode finds a node's group by providerID, then by name. A node
// of no slot (or of a group cluster-autoscaler does not drive) gets the
// empty group: "not autoscaled", never an error.
func (s *Server) NodeGroupForNode(_ context.Context, req *pb.NodeGroupForNodeRequest) (*pb.NodeGroupForNodeResponse, error) {
	n := req.GetNode()
	if n == nil {
		return nil, status.Error(codes.InvalidArgument, "node: required")
	}
	now := s.clock.Now()
	out := &pb.NodeGroupForNodeResponse{NodeGroup: &pb.NodeGroup{}}
	s.views.Read(func(st *projections.State) {
		sl, ok := st.SlotForNode(n.GetName(), n.GetProviderID())
		if !ok {
			return
		}
		g, err := s.group(st, sl.Group)
		if err != nil {
			return
		}
		out.NodeGroup, _ = s.nodeGroup(st, g, now)
	})
	return out, nil
}

// NodeGroupTargetSize is the number of live claims that want a machine,
// from the group's published answers (readsnapshot.go; it does not change
// with time alone). The answer is shared: callers must not change it.
func (s *Server) NodeGroupTargetSize(_ context.Context, req *pb.NodeGroupTargetSizeRequest) (*pb.NodeGroupTargetSizeResponse, error) {
	a := s.reads.cur.Load().groups[req.GetId()]
	if a == nil {
		return nil, notFound(req.GetId())
	}
	return a.target, nil
}

// NodeGroupIncreaseSize creates delta claims on delta free slots.
func (s *Server) NodeGroupIncreaseSize(ctx context.Context, req *pb.NodeGroupIncreaseSizeRequest) (*pb.NodeGroupIncreaseSizeResponse, error) {
	if req.GetDelta() <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "delta: must be positive, got %d", req.GetDelta())
	}
	if err := s.checkGroup(req.GetId()); err != nil {
		return nil, err
	}
	by := s.requester(ctx)
	key, done := s.keys.begin(ctx, by, req.GetId(), req.GetDelta())
	res, err := s.cmds.Execute(ctx, decide.IncreaseSize{Group: req.GetId(), Delta: int(req.GetDelta()), RequestedBy: by, RequestKey: key})
	done(err)
	if err != nil {
		return nil, s.fail(ctx, "NodeGroupIncreaseSize", req.GetId(), err)
	}
	if len(res.Events) == 0 {
		s.log.InfoContext(ctx, "IncreaseSize is a retry of a request accepted within the repeat window; nothing written", "group", req.GetId(), "delta", req.GetDelta(), "key", key, "window", events.RequestRepeatWindow)
	}
	return &pb.NodeGroupIncreaseSizeResponse{}, nil
}

// NodeGroupDeleteNodes cancels (pending) or marks for scale-down (booting,
// ready) the claims of the named nodes. Naming a node whose slot has no
// claim that wants a machine changes nothing and succeeds, so
// cluster-autoscaler's repeated deletes of failed instances always succeed.
func (s *Server) NodeGroupDeleteNodes(ctx context.Context, req *pb.NodeGroupDeleteNodesRequest) (*pb.NodeGroupDeleteNodesResponse, error) {
	if err := s.checkGroup(req.GetId()); err != nil {
		return nil, err
	}
	refs := make([]decide.NodeRef, 0, len(req.GetNodes()))
	for _, n := range req.GetNodes() {
		refs = append(refs, decide.NodeRef{Name: n.GetName(), ProviderID: n.GetProviderID()})
	}
	if _, err := s.cmds.Execute(ctx, decide.DeleteNodes{Group: req.GetId(), Nodes: refs, RequestedBy: s.requester(ctx)}); err != nil {
		return nil, s.fail(ctx, "NodeGroupDeleteNodes", req.GetId(), err)
	}
	return &pb.NodeGroupDeleteNodesResponse{}, nil
}

// NodeGroupDecreaseTargetSize cancels pending claims only (docs/design.md):
// Unavailable when every live claim is past the cancelable phase,
// FailedPrecondition under minSize, success with no live claim.
func (s *Server) NodeGroupDecreaseTargetSize(ctx context.Context, req *pb.NodeGroupDecreaseTargetSizeRequest) (*pb.NodeGroupDecreaseTargetSizeResponse, error) {
	if req.GetDelta() >= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "delta: must be negative, got %d", req.GetDelta())
	}
	if err := s.checkGroup(req.GetId()); err != nil {
		return nil, err
	}
	if _, err := s.cmds.Execute(ctx, decide.DecreaseTargetSize{Group: req.GetId(), Delta: int(req.GetDelta()), RequestedBy: s.requester(ctx)}); err != nil {
		return nil, s.fail(ctx, "NodeGroupDecreaseTargetSize", req.GetId(), err)
	}
	return &pb.NodeGroupDecreaseTargetSizeResponse{}, nil
}

// Instance error classes of cluster-autoscaler (cloudprovider.InstanceErrorClass).
const (
	ErrorClassOutOfResources int32 = 1
	ErrorClassOther          int32 = 99
)

// NodeGroupNodes reports one instance per slot with a live claim or a
// recent failure not yet deleted (instanceOf), from the group's published
// answers (readsnapshot.go). The answer is shared: callers must not change
// it.
func (s *Server) NodeGroupNodes(_ context.Context, req *pb.NodeGroupNodesRequest) (*pb.NodeGroupNodesResponse, error) {
	id := req.GetId()
	snap, _ := s.current(func(snap *readSnapshot, now time.Time) bool {
		a := snap.groups[id]
		return a == nil || a.nodesGoodAt(now)
	})
	a := snap.groups[id]
	if a == nil {
		return nil, notFound(id)
	}
	return a.nodes, nil
}

// errorClass: a boot that did not produce a machine is OutOfResources (CA
// backs the group off and tries another); anything else is Other.
func errorClass(reason string) int32 {
	switch reason {
	case projections.ReasonDeadlineExceeded, projections.ReasonStartupJobFailed, projections.ReasonJobTimeout,
		projections.ReasonReadinessGateTimeout, projections.ReasonAttemptLimitReached:
		return ErrorClassOutOfResources
	}
	return ErrorClassOther
}

// NodeGroupTemplateNodeInfo builds the Node a new machine of the group
// would register as, and puts its bytes in both layouts' fields.
func (s *Server) NodeGroupTemplateNodeInfo(_ context.Context, req *pb.NodeGroupTemplateNodeInfoRequest) (*pb.NodeGroupTemplateNodeInfoResponse, error) {
	now := s.clock.Now()
	var in templateInput
	var err error
	s.views.Read(func(st *projections.State) {
		var g *projections.Group
		if g, err = s.group(st, req.GetId()); err != nil {
			return
		}
		in, err = templateInputOf(st, g)
	})
	if err != nil {
		return nil, err
	}
	node, err := buildTemplateNode(in, now)
	if err != nil {
		return nil, err
	}
	b, err := node.Marshal()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "template node of group %s: marshal: %v", req.GetId(), err)
	}
	return &pb.NodeGroupTemplateNodeInfoResponse{NodeInfo: b, NodeBytes: b}, nil
}

// NodeGroupGetOptions echoes the caller's defaults, overridden by what the
// group declares; see options.go.
func (s *Server) NodeGroupGetOptions(_ context.Context, req *pb.NodeGroupAutoscalingOptionsRequest) (*pb.NodeGroupAutoscalingOptionsResponse, error) {
	var spec events.GroupSpec
	var err error
	s.views.Read(func(st *projections.State) {
		var g *projections.Group
		if g, err = s.group(st, req.GetId()); err == nil {
			spec = g.Spec
		}
	})
	if err != nil {
		return nil, err
	}
	return &pb.NodeGroupAutoscalingOptionsResponse{NodeGroupAutoscalingOptions: groupOptions(spec, req.GetDefaults())}, nil
}

// PricingNodePrice is what an hour of a machine of the node's group (with
// the override of the node's slot) costs, times the hours of the window:
// the same prices the cost report uses (pricing.go, docs/cost.md).
// Unimplemented when the group declares no price.
func (s *Server) PricingNodePrice(_ context.Context, req *pb.PricingNodePriceRequest) (*pb.PricingNodePriceResponse, error) {
	n := req.GetNode()
	if n == nil {
		return nil, status.Error(codes.InvalidArgument, "node: required")
	}
	start, end, err := window(req.GetStartTimestamp(), req.GetEndTimestamp(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	var perHour float64
	var group string
	s.views.Read(func(st *projections.State) {
		var g *projections.Group
		if g, err = s.groupOfPricedNode(st, n); err == nil {
			group = g.Name
			perHour = hourlyPrice(g.Spec, slotCostOfNode(st, n))
		}
	})
	if err != nil {
		return nil, err
	}
	if perHour <= 0 {
		return nil, status.Errorf(codes.Unimplemented, "group %s declares no node price (cost.pricePerHour, cost.powerWatts with cost.energyPricePerKWh, or template.pricing.nodePerHour)", group)
	}
	return &pb.PricingNodePriceResponse{Price: perHour * end.Sub(start).Hours()}, nil
}

// groupOfPricedNode finds the group of a real node (its slot) or of a
// template node (providerID homelab://template-<group>, or the names
// template-<group> and cluster-autoscaler's template-node-for-<group>-<x>).
func (s *Server) groupOfPricedNode(st *projections.State, n *pb.ExternalGrpcNode) (*projections.Group, error) {
	if sl, ok := st.SlotForNode(n.GetName(), n.GetProviderID()); ok {
		return s.group(st, sl.Group)
	}
	if id, ok := strings.CutPrefix(n.GetProviderID(), templateProviderIDPrefix); ok {
		if g, err := s.group(st, id); err == nil {
			return g, nil
		}
	}
	if id, ok := strings.CutPrefix(n.GetName(), templateNamePrefix); ok {
		if g, err := s.group(st, id); err == nil {
			return g, nil
		}
	}
	// cluster-autoscaler renames template nodes template-node-for-<group>-<suffix>.
	if rest, ok := strings.CutPrefix(n.GetName(), "template-node-for-"); ok {
		best := ""
		for name, g := range st.Groups {
			if strings.HasPrefix(rest, name+"-") && len(name) > len(best) && !g.Retired && s.opts.Serves(g) {
				best = name
			}
		}
		if best != "" {
			return st.Groups[best], nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "node %q (providerID %q) is not a node of any group served to cluster-autoscaler", n.GetName(), n.GetProviderID())
}

// PricingPodPrice is podPerHour times the hours of the window. The pod names
// no group, so the price is the highest podPerHour any served group
// declares; Unimplemented when none does.
func (s *Server) PricingPodPrice(_ context.Context, req *pb.PricingPodPriceRequest) (*pb.PricingPodPriceResponse, error) {
	var perHour float64
	s.views.Read(func(st *projections.State) {
		for _, g := range st.Groups {
			if g.Retired || !s.opts.Serves(g) || g.Spec.Template == nil || g.Spec.Template.Pricing == nil {
				continue
			}
			perHour = max(perHour, g.Spec.Template.Pricing.PodPerHour)
		}
	})
	if perHour <= 0 {
		return nil, status.Error(codes.Unimplemented, "no group declares a pod price (template.pricing.podPerHour)")
	}
	start, end, err := window(req.GetStartTimestamp(), req.GetEndTimestamp(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	return &pb.PricingPodPriceResponse{Price: perHour * end.Sub(start).Hours()}, nil
}

// GPULabel is the configured GPU label.
func (s *Server) GPULabel(context.Context, *pb.GPULabelRequest) (*pb.GPULabelResponse, error) {
	return &pb.GPULabelResponse{Label: s.opts.GPULabel}, nil
}

// GetAvailableGPUTypes: none.
func (s *Server) GetAvailableGPUTypes(context.Context, *pb.GetAvailableGPUTypesRequest) (*pb.GetAvailableGPUTypesResponse, error) {
	return &pb.GetAvailableGPUTypesResponse{GpuTypes: map[string]*anypb.Any{}}, nil
}

// Cleanup: nothing to release; the views outlive cluster-autoscaler.
func (s *Server) Cleanup(context.Context, *pb.CleanupRequest) (*pb.CleanupResponse, error) {
	return &pb.CleanupResponse{}, nil
}

// Refresh is called at the start of every cluster-autoscaler loop; the views
// are always current, so there is nothing to do, and it never fails.
func (s *Server) Refresh(context.Context, *pb.RefreshRequest) (*pb.RefreshResponse, error) {
	return &pb.RefreshResponse{}, nil
}

func clamp32(n int) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	if n < -1<<31 {
		return -1 << 31
	}
	return int32(n)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
