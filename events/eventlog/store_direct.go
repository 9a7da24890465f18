package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/claimstream/claimstream/events"
)

// directBatchWait bounds one direct batch get: a replica that took the
// request and died answers nothing, and the caller asks again.
const directBatchWait = 2 * time.Second

// ReadDirect calls fn, in order, for the events from seq from to seq to
// (inclusive) that one replica of the stream answers without a hole,
// through batched direct gets. It needs no consumer and no JetStream meta
// leader, only a live replica of the stream, so it works while a reader's
// consumer is lost with the server that held it.
//
// It stops at the first sequence missing from an answer (the answering
// replica lags, or the log has a gap there: a consumer's reader tells the
// two apart) and returns the first sequence it did not deliver.
func (s *Store) ReadDirect(ctx context.Context, from, to uint64, fn func(events.Event) error) (next uint64, err error) {
	if from == 0 {
		from = 1
	}
	next = from
	for next <= to {
		want := int(min(to-next+1, filterBatch))
		bctx, cancel := context.WithTimeout(ctx, directBatchWait)
		msgs, err := jetstreamext.GetBatch(bctx, s.js, s.cfg.Stream, want, jetstreamext.GetBatchSeq(next))
		if err != nil {
			cancel()
			return next, fmt.Errorf("direct read of %s from %d: %w", s.cfg.Stream, next, err)
		}
		got := 0
		for m, err := range msgs {
			if err != nil {
				cancel()
				if errors.Is(err, jetstreamext.ErrNoMessages) {
					return next, nil
				}
				return next, fmt.Errorf("direct read of %s from %d: %w", s.cfg.Stream, next, err)
			}
			if m.Sequence != next || m.Sequence > to {
				// A hole, or past the range: the rest is not ours to
				// fold from this answer.
				cancel()
				return next, nil
			}
			got++
			next++
			if err := fn(s.decode(m.Subject, m.Sequence, m.Header, m.Data)); err != nil {
				cancel()
				return next, err
			}
		}
		cancel()
		if got < want {
			return next, nil
		}
	}
	return next, nil
}
