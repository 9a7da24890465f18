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

// resendUnanswered makes one publish of an append in tries of at most
// StoreConfig.AnswerWait, sending it again while the caller's deadline
// allows. A stream leader that takes a write in and then loses its quorum
// or its leadership before the write commits drops it without an answer:
// one publish would wait out the caller's whole deadline although a new
// leader could take the write a few seconds later. A resend is safe for
// the same reason as after "no responders": the ids and the expectation
// let the write land at most once, and a resend that meets its own
// earlier landing is recognised (landedBefore). A caller without a
// deadline gets one try, bounded by JetStream's own publish timeout.
func resendUnanswered[A any](ctx context.Context, s *Store, writes []Write, publish func(context.Context) (A, error)) (A, error) {
	held := false
	for try := 1; ; try++ {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) <= s.cfg.AnswerWait {
			return publish(ctx)
		}
		tctx, cancel := context.WithTimeout(ctx, s.cfg.AnswerWait)
		ack, err := publish(tctx)
		unanswered := err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded)
		cancel()
		if try > 1 && isInProcess(err) {
			// The leader still holds the first try: its answer, or its
			// loss, decides; look again shortly.
			if !held {
				held = true
				s.cfg.Logger.Info("append held by the stream's leader, not yet committed; waiting for it", "to", aggregatesNamed(writes))
			}
			select {
			case <-ctx.Done():
				return ack, err
			case <-s.cfg.Clock.After(noRespondersWait):
			}
			continue
		}
		if !unanswered {
			return ack, err
		}
		if h := s.cfg.Health; h != nil {
			h.unanswered()
		}
		s.cfg.Logger.Warn("append unanswered; sending it again",
			"to", aggregatesNamed(writes), "try", try, "waited", s.cfg.AnswerWait, "err", err)
	}
}

// isInProcess reports whether the stream refused a write because it still
// holds one with the same id, proposed and not yet committed.
func isInProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeDuplicateInProcess
}
