package natsserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// nats-server delivers a push consumer's messages to whatever subject its
// creator names outside the server's reserved JetStream subjects, checking
// neither the creator's publish nor its subscribe permissions, and nothing
// in an account's or a stream's limits forbids push consumers. So the
// process removes such consumers itself: a subscriber's push consumer is of
// use to it only where it may subscribe (subscriberInboxes); any other is
// deleted as soon as the server reports it, and at every check. A server
// that took a reserved deliver subject (the mirrors' imports into the
// process's account, the JetStream API every account's requests share)
// would see it removed the same way.

// auditAdvisories is where the server reports every JetStream API request
// of an account with its answer: a consumer create or update among them,
// with the consumer's configuration and the creator's user.
const auditAdvisories = "$JS.EVENT.ADVISORY.API"

// guardQueue makes one replica act on each report.
const guardQueue = "claimstream-subscriber-consumers"

// subscribersMayListen reports whether subscribers may subscribe to subject.
func subscribersMayListen(subject string) bool {
	return server.SubjectMatchesFilter(subject, subscriberInboxes)
}

// watchConsumers subscribes to the server's reports of the subscribers'
// JetStream requests and removes every push consumer they create or update
// that delivers where no subscriber may listen.
func (c *SubscriberCopies) watchConsumers(ctx context.Context) (*nats.Subscription, error) {
	sub, err := c.subs.Conn().QueueSubscribe(auditAdvisories, guardQueue, func(m *nats.Msg) {
		var audit server.JSAPIAudit
		if json.Unmarshal(m.Data, &audit) != nil || !strings.HasPrefix(audit.Subject, "$JS.API.CONSUMER.") {
			return
		}
		var resp server.JSApiConsumerCreateResponse
		if json.Unmarshal([]byte(audit.Response), &resp) != nil || resp.Type != server.JSApiConsumerCreateResponseType ||
			resp.ConsumerInfo == nil || resp.ConsumerInfo.Config == nil {
			return
		}
		user := ""
		if audit.Client != nil {
			user = audit.Client.User
		}
		ci := resp.ConsumerInfo
		c.removeIfStray(ctx, ci.Stream, ci.Name, ci.Config.DeliverSubject, user)
	})
	if err != nil {
		return nil, fmt.Errorf("watch the subscribers' consumers: %w", err)
	}
	// Subscribed before the sweep that follows can miss anything.
	if err := c.subs.Conn().FlushTimeout(10 * time.Second); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch the subscribers' consumers: %w", err)
	}
	return sub, nil
}

// removeIfStray deletes the consumer when it delivers where no subscriber
// may listen. Several replicas may race to one consumer; only the one that
// deletes it logs and counts.
func (c *SubscriberCopies) removeIfStray(ctx context.Context, stream, name, deliver, user string) {
	if deliver == "" || subscribersMayListen(deliver) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.subs.DeleteConsumer(ctx, stream, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		c.log.Warn("could not remove a NATS subscriber's push consumer that delivers outside the subscribers' inboxes; trying again at the next check",
			"stream", stream, "consumer", name, "deliverSubject", deliver, "user", user, "err", err)
	default:
		c.removed.Add(1)
		c.log.Warn("removed a NATS subscriber's push consumer: it delivered outside the subscribers' inboxes",
			"stream", stream, "consumer", name, "deliverSubject", deliver, "user", user, "allowed", subscriberInboxes)
	}
}

// sweepConsumers removes every stray consumer on the copies: those made
// while the process was not watching, or whose report it missed.
func (c *SubscriberCopies) sweepConsumers(ctx context.Context) error {
	var errs []error
	for _, name := range c.streams {
		s, err := c.subs.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("the subscribers' copy of %s: %w", name, err))
			continue
		}
		list := s.ListConsumers(ctx)
		for ci := range list.Info() {
			if ci.Config.DeliverSubject != "" {
				c.removeIfStray(ctx, name, ci.Name, ci.Config.DeliverSubject, "")
			}
		}
		if err := list.Err(); err != nil {
			errs = append(errs, fmt.Errorf("the consumers of the subscribers' copy of %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// ConsumersRemoved is how many subscribers' push consumers this process
// removed for delivering outside the subscribers' inboxes.
func (c *SubscriberCopies) ConsumersRemoved() uint64 { return c.removed.Load() }
