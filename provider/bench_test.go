package provider

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// The provider's benchmarks: a pool of 10,000 slots in 100 groups, half of
// each group claimed (20 ready, 10 booting, 20 pending), on a real embedded
// JetStream store; BenchmarkReadsLoopback uses 1,000 slots in 100 groups
// (the same shares of each group) over a loopback TCP connection.
//
//	go test ./provider -run '^$' -bench . -benchtime 2s
//
// Each read benchmark reports the latency percentiles of single calls
// (p50-ns, p99-ns) and the throughput (calls/s), in process (the Server's
// methods called directly) and over a bufconn gRPC connection.

const (
	benchGroups        = 100
	benchSlotsPerGroup = 100
)

func benchGroup(i int) string { return fmt.Sprintf("g%02d", i%benchGroups) }

// benchPool declares the pool of 10,000 slots on h and claims half of every
// group.
func benchPool(b *testing.B, h *handlerstest.Harness) { benchPoolOf(b, h, benchSlotsPerGroup) }

// benchPoolOf declares 100 groups of perGroup slots and claims half of
// every group: of the claims, 60% booted and 40% ready.
func benchPoolOf(b *testing.B, h *handlerstest.Harness, perGroup int) {
	b.Helper()
	began := time.Now()
	ctx := context.Background()
	now := h.Clock.Now().UTC()
	for g := range benchGroups {
		group := benchGroup(g)
		ws := []events.Write{{Aggregate: events.GroupAggregate(group), Events: []events.Event{{Time: now, Data: events.GroupDeclared{
			Ref: events.Ref{Group: group, Cause: "bench"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler},
		}}}}}
		for s := range perGroup {
			slot := fmt.Sprintf("%s-n%03d", group, s)
			ws = append(ws, events.Write{Aggregate: events.SlotAggregate(slot), Events: []events.Event{{Time: now, Data: events.SlotDeclared{
				Ref: events.Ref{Slot: slot, Group: group, Cause: "bench"}, Spec: events.SlotSpec{ProviderID: "homelab://" + slot},
			}}}})
		}
		res, err := h.Store.AppendWrites(ctx, ws...)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Views.WaitFor(ctx, res.Last); err != nil {
			b.Fatal(err)
		}
	}
	for g := range benchGroups {
		res := h.MustExec(decide.IncreaseSize{Group: benchGroup(g), Delta: perGroup / 2, RequestedBy: "bench"})
		for i, c := range res.Claims() {
			if i >= perGroup*3/10 {
				break
			}
			h.MustExec(decide.BootClaim{Claim: c})
			if i < perGroup/5 {
				h.MustExec(decide.MarkReady{Claim: c, Node: c})
			}
		}
	}
	b.Logf("pool of %d slots in %d groups declared and half claimed in %v", benchGroups*perGroup, benchGroups, time.Since(began).Round(time.Millisecond))
}

// bufconnClient serves srv over an in-memory connection.
func bufconnClient(b *testing.B, srv *Server) pb.CloudProviderClient {
	b.Helper()
	gs, err := NewGRPCServer(srv, nil, true)
	if err != nil {
		b.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, gs, time.Second) }()
	cc, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cc.Close()
		cancel()
		<-done
	})
	return pb.NewCloudProviderClient(cc)
}

// loopbackClient serves srv on a loopback TCP port, as serve does.
func loopbackClient(b *testing.B, srv *Server) pb.CloudProviderClient {
	b.Helper()
	gs, err := NewGRPCServer(srv, nil, true)
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, gs, time.Second) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cc.Close()
		cancel()
		<-done
	})
	return pb.NewCloudProviderClient(cc)
}

// measure runs call b.N times one after another and reports p50, p99 and
// calls/s.
func measure(b *testing.B, call func(i int) error) {
	b.Helper()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := call(i); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	report(b, lat)
}

func report(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	n := len(lat)
	b.ReportMetric(float64(lat[n/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[min(n-1, n*99/100)].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "calls/s")
}

// parallel runs call from GOMAXPROCS goroutines and reports calls/s.
func parallel(b *testing.B, call func(i int) error) {
	b.Helper()
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(p *testing.PB) {
		for p.Next() {
			if err := call(int(next.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

func BenchmarkReads(b *testing.B) {
	h := handlerstest.New(b)
	benchPool(b, h)
	srv := New(h.Views, h.Service, h.Clock, Options{Logger: discard})
	client := bufconnClient(b, srv)
	ctx := context.Background()

	type rpc func(i int) error
	calls := map[string][2]rpc{
		"TargetSize": {
			func(i int) error {
				_, err := srv.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: benchGroup(i)})
				return err
			},
			func(i int) error {
				_, err := client.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: benchGroup(i)})
				return err
			},
		},
		"NodeGroupNodes": {
			func(i int) error {
				r, err := srv.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: benchGroup(i)})
				if err == nil && len(r.GetInstances()) != 50 {
					err = fmt.Errorf("%d instances", len(r.GetInstances()))
				}
				return err
			},
			func(i int) error {
				_, err := client.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: benchGroup(i)})
				return err
			},
		},
		"NodeGroups": {
			func(int) error {
				r, err := srv.NodeGroups(ctx, &pb.NodeGroupsRequest{})
				if err == nil && len(r.GetNodeGroups()) != benchGroups {
					err = fmt.Errorf("%d groups", len(r.GetNodeGroups()))
				}
				return err
			},
			func(int) error {
				_, err := client.NodeGroups(ctx, &pb.NodeGroupsRequest{})
				return err
			},
		},
	}
	for _, name := range []string{"TargetSize", "NodeGroupNodes", "NodeGroups"} {
		for j, via := range []string{"direct", "bufconn"} {
			call := calls[name][j]
			b.Run(name+"/"+via, func(b *testing.B) { measure(b, call) })
			b.Run(name+"/"+via+"/parallel", func(b *testing.B) { parallel(b, call) })
		}
	}
}

// BenchmarkReadsLoopback is the setting: 1,000 slots in 100
// groups, cluster-autoscaler's reads over a loopback TCP gRPC connection.
func BenchmarkReadsLoopback(b *testing.B) { benchReadsLoopback(b, 10) }

// benchReadsLoopback measures cluster-autoscaler's three reads over a
// loopback TCP gRPC connection on a pool of perGroup slots in each of the
// benchmark's groups, half of each group claimed.
func benchReadsLoopback(b *testing.B, perGroup int) {
	h := handlerstest.New(b)
	benchPoolOf(b, h, perGroup)
	client := loopbackClient(b, New(h.Views, h.Service, h.Clock, Options{Logger: discard}))
	ctx := context.Background()
	calls := map[string]func(i int) error{
		"TargetSize": func(i int) error {
			_, err := client.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: benchGroup(i)})
			return err
		},
		"NodeGroupNodes": func(i int) error {
			r, err := client.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: benchGroup(i)})
			if err == nil && len(r.GetInstances()) != perGroup/2 {
				err = fmt.Errorf("%d instances", len(r.GetInstances()))
			}
			return err
		},
		"NodeGroups": func(int) error {
			r, err := client.NodeGroups(ctx, &pb.NodeGroupsRequest{})
			if err == nil && len(r.GetNodeGroups()) != benchGroups {
				err = fmt.Errorf("%d groups", len(r.GetNodeGroups()))
			}
			return err
		},
	}
	for _, name := range []string{"TargetSize", "NodeGroupNodes", "NodeGroups"} {
		b.Run(name, func(b *testing.B) { measure(b, calls[name]) })
	}
}

// BenchmarkIncreaseSize is IncreaseSize(1) end to end over bufconn gRPC:
// decide, append to JetStream (batch of one), wait for the views. "nosync"
// is the test server (fsync off); "fsync" is an embedded server with
// NoSync=false, as production runs it.
func BenchmarkIncreaseSize(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "nosync"
		if durable {
			name = "fsync"
		}
		b.Run(name, func(b *testing.B) {
			es := eventstest.StartServer(b)
			if durable {
				es.NoSync = false
				es.Restart()
			}
			h := handlerstest.OnServer(b, es, eventlog.StoreConfig{})
			benchPool(b, h)
			client := bufconnClient(b, New(h.Views, h.Service, h.Clock, Options{Logger: discard}))
			ctx := context.Background()
			// reset empties a full group of its pending claims.
			reset := func(group string) error {
				var pending int
				h.Read(func(s *projections.State) {
					for _, c := range s.LiveClaims(group) {
						if c.IsPending() {
							pending++
						}
					}
				})
				_, err := h.Exec(decide.DecreaseTargetSize{Group: group, Delta: -pending, RequestedBy: "bench"})
				return err
			}
			full := func(group string) bool {
				var free int
				h.Read(func(s *projections.State) { free = len(s.FreeSlots(group, h.Clock.Now())) })
				return free == 0
			}
			// serial: only the IncreaseSize calls are timed; a full group is
			// reset with the timer stopped.
			b.Run("serial", func(b *testing.B) {
				lat := make([]time.Duration, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					group := benchGroup(i)
					if full(group) {
						b.StopTimer()
						if err := reset(group); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
					t0 := time.Now()
					if _, err := client.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: group, Delta: 1}); err != nil {
						b.Fatal(err)
					}
					lat[i] = time.Since(t0)
				}
				b.StopTimer()
				report(b, lat)
			})
			// parallel: GOMAXPROCS callers on different groups; the resets
			// (one batch cancel per ~70 increases of a group) are included.
			b.Run("parallel", func(b *testing.B) {
				parallel(b, func(i int) error {
					group := benchGroup(i)
					for {
						_, err := client.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: group, Delta: 1})
						if status.Code(err) != codes.FailedPrecondition {
							return err
						}
						if err := reset(group); err != nil {
							return err
						}
					}
				})
			})
		})
	}
}
