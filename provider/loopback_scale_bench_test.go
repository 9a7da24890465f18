package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/claimstream/claimstream/handlers/handlerstest"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// BenchmarkReadsLoopbackScale: cluster-autoscaler's three reads over a
// loopback TCP gRPC connection at 1,000 and 10,000 slots in 100 groups
// (half of each group claimed), in the same run, so NodeGroups (the whole
// pool in one answer) is set against TargetSize (one group).
//
//	go test ./provider -run '^$' -bench ReadsLoopbackScale -benchtime 2s -count 3
func BenchmarkReadsLoopbackScale(b *testing.B) {
	for _, perGroup := range []int{10, 100} {
		b.Run(fmt.Sprintf("slots=%d", perGroup*benchGroups), func(b *testing.B) {
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
		})
	}
}
