package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/events/eventlog"
)

const (
	// claimstream_log_writable: 1 while the event log can be written, 0
	// while appends are refused (disk full, JetStream down).
	InstLogWritable = "claimstream_log_writable"
	// claimstream_log_write_failures_total{reason}: failed appends, by
	// reason (events.WriteFailure*).
	InstLogWriteFailures = "claimstream_log_write_failures"
	// claimstream_log_append_resends_total: tries of appends sent again
	// because the try before got no answer in time.
	InstLogAppendResends = "claimstream_log_append_resends"
)

// ObserveLogHealth exports the log's writability and its failed appends.
func (m *Metrics) ObserveLogHealth(h *eventlog.LogHealth) error {
	writable, err := m.meter.Int64ObservableGauge(InstLogWritable, metric.WithDescription("1 while the event log can be written, 0 while appends are refused."))
	if err != nil {
		return err
	}
	failures, err := m.meter.Int64ObservableCounter(InstLogWriteFailures, metric.WithDescription("Failed appends to the event log, by reason."))
	if err != nil {
		return err
	}
	resends, err := m.meter.Int64ObservableCounter(InstLogAppendResends, metric.WithDescription("Appends sent again because the try before got no answer in time."))
	if err != nil {
		return err
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		v := int64(0)
		if h.Status().Writable {
			v = 1
		}
		o.ObserveInt64(writable, v)
		for reason, n := range h.WriteFailures() {
			o.ObserveInt64(failures, int64(n), metric.WithAttributes(attribute.String("reason", reason)))
		}
		o.ObserveInt64(resends, int64(h.Resends()))
		return nil
	}, writable, failures, resends)
	return err
}

const (
	// claimstream_log_consumers{stream}: the JetStream consumers the
	// stream has (readers in flight, the views' reader, the sinks'
	// durables). A stream at its limit starts no new reader.
	InstLogConsumers = "claimstream_log_consumers"
	// claimstream_log_consumer_limit{stream}: the stream's consumer limit.
	InstLogConsumerLimit = "claimstream_log_consumer_limit"
)

// ConsumerUsageFunc reads the consumer count and limit of each stream.
type ConsumerUsageFunc func(ctx context.Context) map[string]eventlog.ConsumerUsage

// ObserveConsumers exports each stream's consumer count and limit at every
// scrape; a stream usage cannot read is left out of that scrape.
func (m *Metrics) ObserveConsumers(usage ConsumerUsageFunc) error {
	count, err := m.meter.Int64ObservableGauge(InstLogConsumers, metric.WithDescription("JetStream consumers of the stream (readers, the views' reader, sinks)."))
	if err != nil {
		return err
	}
	limit, err := m.meter.Int64ObservableGauge(InstLogConsumerLimit, metric.WithDescription("The stream's consumer limit."))
	if err != nil {
		return err
	}
	_, err = m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for stream, u := range usage(ctx) {
			attrs := metric.WithAttributes(attribute.String("stream", stream))
			o.ObserveInt64(count, int64(u.Consumers), attrs)
			o.ObserveInt64(limit, int64(u.Limit), attrs)
		}
		return nil
	}, count, limit)
	return err
}

const (
	// claimstream_nats_auth_failures_total: logins the NATS client port
	// refused (a wrong password, an unknown user, no credentials).
	InstNATSAuthFailures = "claimstream_nats_auth_failures"
	// claimstream_nats_subscriber_consumers: consumers the NATS
	// subscribers hold in their own account, and their limit.
	InstNATSSubscriberConsumers     = "claimstream_nats_subscriber_consumers"
	InstNATSSubscriberConsumerLimit = "claimstream_nats_subscriber_consumer_limit"
	// claimstream_nats_subscriber_consumers_removed_total: subscribers'
	// push consumers this replica removed for delivering outside the
	// subscribers' inboxes.
	InstNATSSubscriberConsumersRemoved = "claimstream_nats_subscriber_consumers_removed"
)

// NATSAccess is what the metrics read of the NATS client port.
type NATSAccess struct {
	// AuthFailures is the count of refused logins.
	AuthFailures func() uint64
	// SubscriberConsumers reads the subscribers' consumers and limit (ok
	// false: not known this scrape); nil without subscribers.
	SubscriberConsumers func(ctx context.Context) (used, limit int, ok bool)
	// SubscriberConsumersRemoved is the count of subscribers' push
	// consumers removed; nil without subscribers.
	SubscriberConsumersRemoved func() uint64
}

// ObserveNATSAccess exports the client port's refused logins, what the
// subscribers hold, and their push consumers removed.
func (m *Metrics) ObserveNATSAccess(a NATSAccess) error {
	failures, err := m.meter.Int64ObservableCounter(InstNATSAuthFailures, metric.WithDescription("Logins the NATS client port refused."))
	if err != nil {
		return err
	}
	used, err := m.meter.Int64ObservableGauge(InstNATSSubscriberConsumers, metric.WithDescription("Consumers the NATS subscribers hold in their own account."))
	if err != nil {
		return err
	}
	limit, err := m.meter.Int64ObservableGauge(InstNATSSubscriberConsumerLimit, metric.WithDescription("The NATS subscribers' consumer limit."))
	if err != nil {
		return err
	}
	removed, err := m.meter.Int64ObservableCounter(InstNATSSubscriberConsumersRemoved, metric.WithDescription("NATS subscribers' push consumers removed for delivering outside the subscribers' inboxes."))
	if err != nil {
		return err
	}
	_, err = m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		o.ObserveInt64(failures, int64(a.AuthFailures()))
		if a.SubscriberConsumers != nil {
			if u, l, ok := a.SubscriberConsumers(ctx); ok {
				o.ObserveInt64(used, int64(u))
				o.ObserveInt64(limit, int64(l))
			}
		}
		if a.SubscriberConsumersRemoved != nil {
			o.ObserveInt64(removed, int64(a.SubscriberConsumersRemoved()))
		}
		return nil
	}, failures, used, limit, removed)
	return err
}
