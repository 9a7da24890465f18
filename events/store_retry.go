package events

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// While a cluster moves a stream's leadership, or its stream is busy, a
// publish can briefly find nobody to answer it ("no responders", "no
// response from stream"). An append carries the ids of its
// events, so sending it again is safe: what landed is recognised, not
// stored twice. The append is retried for a short, bounded while.
const (
	noRespondersRetries = 20
	noRespondersWait    = 100 * time.Millisecond
)

func isNoResponders(err error) bool {
	return err != nil && (errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		strings.Contains(err.Error(), "no responders"))
}

// retryNoResponders sends the writes again while the server had no
// responder for them, at most noRespondersRetries times.
func (s *Store) retryNoResponders(ctx context.Context, res AppendResult, err error, writes []Write) (AppendResult, error) {
	for i := 0; i < noRespondersRetries && isNoResponders(err) && ctx.Err() == nil; i++ {
		select {
		case <-ctx.Done():
			return res, err
		case <-s.cfg.Clock.After(noRespondersWait):
		}
		res, err = s.appendWrites(ctx, writes...)
	}
	return res, err
}
