package natsserver

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventlog"
)

// On a cluster, replicas that start together create the same streams and
// buckets at the same moment. nats-server answers one of the racing
// creates of a stream and may leave the others unanswered until their
// timeout, while the stream exists by then. ClusterAdmin gives each
// create-or-update a short deadline and tries again, so the racers find
// the stream made by the winner instead of waiting out a long timeout.

// clusterAdminAttempt bounds one create-or-update on a cluster.
const clusterAdminAttempt = 3 * time.Second

// ClusterAdmin wraps js so that its stream and bucket create-or-updates
// are retried (bounded by the caller's ctx) when an attempt gets no
// answer.
func ClusterAdmin(js jetstream.JetStream, log *slog.Logger) jetstream.JetStream {
	if log == nil {
		log = slog.Default()
	}
	return &clusterAdmin{JetStream: js, log: log}
}

type clusterAdmin struct {
	jetstream.JetStream
	log *slog.Logger
}

// retry runs op with a short deadline until it is answered or ctx ends.
func retry[T any](ctx context.Context, a *clusterAdmin, what string, op func(context.Context) (T, error)) (T, error) {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, clusterAdminAttempt)
		v, err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !eventlog.Unanswered(err) {
			return v, err
		}
		if attempt == 1 {
			a.log.Debug("JetStream did not answer a create on the cluster; trying again", "what", what, "err", err)
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

func (a *clusterAdmin) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return retry(ctx, a, "stream "+cfg.Name, func(ctx context.Context) (jetstream.Stream, error) {
		return a.JetStream.CreateOrUpdateStream(ctx, cfg)
	})
}

func (a *clusterAdmin) CreateOrUpdateObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	return retry(ctx, a, "object store "+cfg.Bucket, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return a.JetStream.CreateOrUpdateObjectStore(ctx, cfg)
	})
}

func (a *clusterAdmin) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return retry(ctx, a, "key-value bucket "+cfg.Bucket, func(ctx context.Context) (jetstream.KeyValue, error) {
		return a.JetStream.CreateOrUpdateKeyValue(ctx, cfg)
	})
}
