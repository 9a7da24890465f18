package provider

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/claimstream/claimstream/events"
)

// LogReasonTrailer carries, on a NOT_SERVING health check, why the event
// log cannot be written.
const LogReasonTrailer = "claimstream-not-ready-reason"

// logAwareHealth answers Check with NOT_SERVING while the event log cannot
// be written (every write would be refused), whatever the service status.
type logAwareHealth struct {
	*health.Server
	log *events.LogHealth
}

func withLogHealth(hs *health.Server, log *events.LogHealth) healthpb.HealthServer {
	if log == nil {
		return hs
	}
	return logAwareHealth{Server: hs, log: log}
}

func (h logAwareHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if st := h.log.Status(); !st.Writable {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LogReasonTrailer, "event log cannot be written: "+st.Reason))
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return h.Server.Check(ctx, req)
}
