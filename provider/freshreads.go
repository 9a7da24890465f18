package provider

import (
	"context"
	"strings"

	"google.golang.org/grpc"
)

// writeRPCs are the provider's calls that write; every other call reads
// the views.
var writeRPCs = []string{"/NodeGroupIncreaseSize", "/NodeGroupDeleteNodes", "/NodeGroupDecreaseTargetSize"}

// FreshReads is a gRPC interceptor that asks fresh (handlers.Leadership's
// FreshReads) before every read call, so a follower never answers from
// views behind the log; a refusal keeps its code (Unavailable) and
// message. Writes go through: the write gate answers them.
func FreshReads(fresh func(context.Context) error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		for _, w := range writeRPCs {
			if strings.HasSuffix(info.FullMethod, w) {
				return next(ctx, req)
			}
		}
		if err := fresh(ctx); err != nil {
			return nil, toStatus(info.FullMethod, "", err)
		}
		return next(ctx, req)
	}
}
