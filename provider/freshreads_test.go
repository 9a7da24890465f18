package provider

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/handlers/decide"
)

// Reads on a follower whose views are behind are Unavailable with the
// reason; writes go on to the write gate.
func TestFreshReadsRefusesStaleReadsAndPassesWrites(t *testing.T) {
	behind := &decide.Error{Code: decide.CodeUnavailable, Msg: "views 3 events behind the log"}
	icpt := FreshReads(func(context.Context) error { return behind })
	called := 0
	next := func(context.Context, any) (any, error) { called++; return "ok", nil }
	const svc = "/clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider"
	for _, m := range []string{"/NodeGroupTargetSize", "/NodeGroups", "/NodeGroupNodes", "/NodeGroupForNode"} {
		_, err := icpt(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: svc + m}, next)
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != behind.Msg {
			t.Errorf("%s: %v", m, err)
		}
	}
	if called != 0 {
		t.Fatalf("a stale read was answered %d times", called)
	}
	for _, m := range writeRPCs {
		if _, err := icpt(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: svc + m}, next); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	if called != len(writeRPCs) {
		t.Fatalf("writes passed %d times, want %d", called, len(writeRPCs))
	}
}
