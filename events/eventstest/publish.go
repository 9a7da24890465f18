package eventstest

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BoundedPublisher publishes asynchronously (a benchmark's log generator:
// many events, no expectations) with at most Window messages awaiting
// their acknowledgement. An unbounded async publisher outruns a server
// that shares a busy machine and fails with "stalled with too many
// outstanding async published messages"; this one waits, chunk by chunk.
type BoundedPublisher struct {
	js      jetstream.JetStream
	window  int
	opts    []jetstream.PublishOpt
	pending []jetstream.PubAckFuture
}

// DefaultPublishWindow is well under nats.go's default limit of
// outstanding async publishes (4,000).
const DefaultPublishWindow = 1024

// NewBoundedPublisher publishes on js with at most window messages in
// flight (DefaultPublishWindow when window <= 0). window must not exceed the
// limit js was made with (jetstream.WithPublishAsyncMaxPending). opts go
// with every publish.
func NewBoundedPublisher(js jetstream.JetStream, window int, opts ...jetstream.PublishOpt) *BoundedPublisher {
	if window <= 0 {
		window = DefaultPublishWindow
	}
	return &BoundedPublisher{js: js, window: window, opts: opts, pending: make([]jetstream.PubAckFuture, 0, window)}
}

// Publish sends m, first waiting for the previous chunk when the window is
// full.
func (p *BoundedPublisher) Publish(ctx context.Context, m *nats.Msg) error {
	if len(p.pending) >= p.window {
		if err := p.Flush(ctx); err != nil {
			return err
		}
	}
	f, err := p.js.PublishMsgAsync(m, p.opts...)
	if err != nil {
		return fmt.Errorf("publish to %s: %w", m.Subject, err)
	}
	p.pending = append(p.pending, f)
	return nil
}

// Flush waits until every message sent is acknowledged, and returns the
// first refusal among them.
func (p *BoundedPublisher) Flush(ctx context.Context) error {
	select {
	case <-p.js.PublishAsyncComplete():
	case <-ctx.Done():
		return fmt.Errorf("waiting for %d publish acknowledgements: %w", len(p.pending), ctx.Err())
	}
	defer func() { p.pending = p.pending[:0] }()
	for _, f := range p.pending {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish to %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
