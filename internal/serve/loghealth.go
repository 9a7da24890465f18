package serve

import (
	"context"
	"time"

	"log/slog"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/handlers/telemetry"
)

// logHealth is whether the event log can be written, and the monitor that
// keeps it (disk full, JetStream down) and recovers without a restart. The
// store refuses appends at once while it is down; /readyz, the gRPC health
// service and claimstream_log_writable show it.
type logHealth struct {
	health  *eventlog.LogHealth
	monitor *natsserver.LogMonitor
}

func newLogHealth(emb *natsserver.Embedded, log *slog.Logger, tel *telemetry.Telemetry, stream string) logHealth {
	// The disk is watched in real time, whatever clock drives the views.
	clk := clock.RealClock{}
	h := eventlog.NewLogHealth(clk.Now())
	if tel != nil {
		if err := tel.Metrics.ObserveLogHealth(h); err != nil {
			log.Warn("no log health metrics", "err", err)
		}
	}
	opts := natsserver.LogMonitorOptions{Clock: clk, Logger: log}
	if emb.Clustered() {
		// On three replicas the log is writable only with a JetStream
		// quorum and a leader of its stream (events/natsserver/cluster_health.go).
		opts.Stream = first(stream, "CLAIMSTREAM")
		if tel != nil {
			if err := tel.Metrics.ObserveCluster(emb.ClusterStatus); err != nil {
				log.Warn("no cluster metrics", "err", err)
			}
			if err := tel.Metrics.ObserveStreamLeader(telemetry.InstLogStreamLeader, func() bool { return emb.StreamLeader(opts.Stream) == emb.Server.Name() }); err != nil {
				log.Warn("no cluster metrics", "err", err)
			}
		}
	}
	return logHealth{health: h, monitor: natsserver.NewLogMonitor(emb, h, opts)}
}

// consumerUsage reads the log stream's consumer count for the metrics, in
// a bounded time per scrape.
func consumerUsage(store *eventlog.Store) telemetry.ConsumerUsageFunc {
	return func(ctx context.Context) map[string]eventlog.ConsumerUsage {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		u, err := store.ConsumerUsage(ctx)
		if err != nil {
			return nil
		}
		return map[string]eventlog.ConsumerUsage{store.Stream(): u}
	}
}

// natsAccessMetrics reads the client port's refused logins, the
// subscribers' consumers and those removed, for the metrics.
func natsAccessMetrics(emb *natsserver.Embedded, copies *natsserver.SubscriberCopies) telemetry.NATSAccess {
	a := telemetry.NATSAccess{AuthFailures: emb.AuthFailures.Total}
	if copies != nil {
		a.SubscriberConsumers = func(ctx context.Context) (int, int, bool) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			u, err := copies.Usage(ctx)
			return u.Consumers, u.ConsumerLimit, err == nil
		}
		a.SubscriberConsumersRemoved = copies.ConsumersRemoved
	}
	return a
}
