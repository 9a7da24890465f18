package natsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"
)

// subscriberCopyCheck is how often the process makes sure every stream
// subscribers read has its copy (a stream created later, such as the
// dead-letter stream, or a copy deleted).
const subscriberCopyCheck = 30 * time.Second

// SubscriberCopies keeps the subscribers' copies of the process's streams
// (see Access): a mirror of each stream of Access.Streams that exists, in
// SubscribersAccount, under the same name.
type SubscriberCopies struct {
	proc, subs jetstream.JetStream
	streams    []string
	consumers  int
	log        *slog.Logger
	// removed counts the stray push consumers this process deleted
	// (subscriber_guard.go).
	removed atomic.Uint64
}

// SubscriberCopies returns the keeper of the subscribers' copies, or nil
// when no subscriber can connect (nothing to copy for).
func (e *Embedded) SubscriberCopies(log *slog.Logger) (*SubscriberCopies, error) {
	if e.SubscribersConn == nil || len(e.cfg.Access.Subscribers) == 0 {
		return nil, nil
	}
	proc, err := jetstream.New(e.Conn)
	if err != nil {
		return nil, fmt.Errorf("subscribers' copies: %w", err)
	}
	subs, err := jetstream.New(e.SubscribersConn)
	if err != nil {
		return nil, fmt.Errorf("subscribers' copies: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &SubscriberCopies{proc: proc, subs: subs, streams: e.cfg.Access.Streams,
		consumers: e.cfg.Access.subscriberConsumers(), log: log}, nil
}

// Ensure creates the copy of every stream that exists and has none, and
// brings an existing copy's retention and replicas in line with its
// stream's. It returns the copies it created.
func (c *SubscriberCopies) Ensure(ctx context.Context) ([]string, error) {
	var created []string
	var errs []error
	for _, name := range c.streams {
		origin, err := c.proc.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", name, err))
			continue
		}
		oc := origin.CachedInfo().Config
		cfg := jetstream.StreamConfig{
			Name:        name,
			Description: "claimstream: the subscribers' read-only copy of " + name,
			Mirror: &jetstream.StreamSource{Name: name, External: &jetstream.ExternalStream{
				APIPrefix:     subscriberCopyAPI,
				DeliverPrefix: subscriberCopyDeliver + "." + name,
			}},
			Storage:      jetstream.FileStorage,
			Retention:    jetstream.LimitsPolicy,
			MaxAge:       oc.MaxAge,
			Replicas:     oc.Replicas,
			DenyDelete:   true,
			DenyPurge:    true,
			AllowDirect:  true,
			MaxConsumers: c.consumers,
		}
		_, err = c.subs.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			if _, err := c.subs.CreateStream(ctx, cfg); err != nil {
				errs = append(errs, fmt.Errorf("create the subscribers' copy of %s: %w", name, err))
				continue
			}
			created = append(created, name)
		case err != nil:
			errs = append(errs, fmt.Errorf("the subscribers' copy of %s: %w", name, err))
		default:
			if _, err := c.subs.UpdateStream(ctx, cfg); err != nil {
				errs = append(errs, fmt.Errorf("update the subscribers' copy of %s: %w", name, err))
			}
		}
	}
	return created, errors.Join(errs...)
}

// Run ensures the copies now and every subscriberCopyCheck until ctx ends.
// Meanwhile it removes the subscribers' push consumers that deliver outside
// their inboxes (subscriber_guard.go): each as the server reports it, and
// all of them at every check.
func (c *SubscriberCopies) Run(ctx context.Context, clk clock.WithTicker) {
	t := clk.NewTicker(subscriberCopyCheck)
	defer t.Stop()
	var watch *nats.Subscription
	defer func() {
		if watch != nil {
			_ = watch.Unsubscribe()
		}
	}()
	first := true
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if watch == nil {
			var err error
			if watch, err = c.watchConsumers(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("not watching the NATS subscribers' consumers yet; trying again", "every", subscriberCopyCheck, "err", err)
			}
		}
		created, err := c.Ensure(cctx)
		if serr := c.sweepConsumers(cctx); serr != nil && ctx.Err() == nil {
			c.log.Warn("could not check the NATS subscribers' consumers; trying again", "every", subscriberCopyCheck, "err", serr)
		}
		cancel()
		for _, name := range created {
			if first {
				c.log.Info("subscribers read a copy of the stream in their own account", "stream", name, "account", SubscribersAccount)
			} else {
				c.log.Warn("the subscribers' copy of a stream was missing; made again", "stream", name, "account", SubscribersAccount)
			}
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn("subscribers' copies of the streams not all in place; trying again", "every", subscriberCopyCheck, "err", err)
		}
		first = false
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// SubscriberUsage is what the subscribers hold of their account's limits.
type SubscriberUsage struct {
	Consumers, ConsumerLimit int
}

// Usage reads the subscribers' account's consumer count and limit.
func (c *SubscriberCopies) Usage(ctx context.Context) (SubscriberUsage, error) {
	info, err := c.subs.AccountInfo(ctx)
	if err != nil {
		return SubscriberUsage{}, fmt.Errorf("the subscribers' account: %w", err)
	}
	return SubscriberUsage{Consumers: info.Consumers, ConsumerLimit: info.Limits.MaxConsumers}, nil
}
