package provider

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// LogReasonTrailer carries, on a NOT_SERVING health check, why the event
// log cannot be written.
const LogReasonTrailer = "claimstream-not-ready-reason"

// logAwareHealth answers Check with NOT_SERVING while the event log cannot
// be written (every write would be refused), whatever the service status.
type logAwareHealth struct {
	*health.Server
	log   *eventlog.LogHealth
	views *projections.Runner
}

// withLogHealth makes Check answer NOT_SERVING, with the reason in the
// LogReasonTrailer, while the log cannot be written or the views are not
// current (catching up after a start or a failover, or built over a gap):
// the same conditions as the REST API's /readyz.
func withLogHealth(hs *health.Server, log *eventlog.LogHealth, views *projections.Runner) healthpb.HealthServer {
	if log == nil && views == nil {
		return hs
	}
	return logAwareHealth{Server: hs, log: log, views: views}
}

func (h logAwareHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if why := h.notReady(ctx); why != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LogReasonTrailer, why))
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return h.Server.Check(ctx, req)
}

// notReady says why the provider must not take traffic now, or "".
func (h logAwareHealth) notReady(ctx context.Context) string {
	if h.log != nil {
		if st := h.log.Status(); !st.Writable {
			return "event log cannot be written: " + st.Reason
		}
	}
	if h.views == nil {
		return ""
	}
	if problem, blocking := h.views.Problem(); blocking {
		return "log gaps: " + problem
	}
	ok, last, err := h.views.CaughtUpWithin(ctx, projections.ReadinessFoldWait)
	switch {
	case err != nil:
		return "cannot read the log: " + err.Error()
	case !ok:
		seq := h.views.Seq()
		return fmt.Sprintf("views catching up: at %d of %d", seq, last)
	}
	return ""
}
