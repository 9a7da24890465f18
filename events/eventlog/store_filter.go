package eventlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/claimstream/claimstream/events"
)

// filterBatch is how many messages one direct batch get asks for.
const filterBatch = 512

// ReadAggregate calls fn for every event of one aggregate (a slot with its
// claims, or a group), in order, up to the aggregate's last event at the time
// of the call. It reads only the aggregate's subjects, so its cost follows
// the aggregate's history, not the log's length: it is how an audit reads a
// slot's whole story, collected claims included, from a long log.
func (s *Store) ReadAggregate(ctx context.Context, agg events.Aggregate, fn func(events.Event) error) error {
	if agg.Name == "" {
		return fmt.Errorf("read aggregate: %s has no name", agg.Kind)
	}
	return s.ReadFiltered(ctx, s.subjects.Filter(agg), 1, fn)
}

// ReadFiltered calls fn, in order, for every event with seq >= from whose
// subject matches filter (NATS wildcards allowed: "cs.slot.*.ClaimFailed"),
// up to the last matching event at the time of the call. Entries this reader
// cannot decode are counted, logged and passed on with Data nil, as Read does.
//
// It uses batched direct gets with the subject filter (the server skips the
// blocks that hold no matching subject), bounded by the last matching
// sequence, so it returns without waiting for events that are not there.
func (s *Store) ReadFiltered(ctx context.Context, filter string, from uint64, fn func(events.Event) error) error {
	if from == 0 {
		from = 1
	}
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.cfg.Stream, err)
	}
	last, err := st.GetLastMsgForSubject(ctx, filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: last of %s: %w", s.cfg.Stream, filter, err)
	}
	to := last.Sequence
	next := from
	for next <= to {
		msgs, err := jetstreamext.GetBatch(ctx, s.js, s.cfg.Stream, filterBatch,
			jetstreamext.GetBatchSeq(next), jetstreamext.GetBatchSubject(filter))
		if err != nil {
			return fmt.Errorf("read %s %s from %d: %w", s.cfg.Stream, filter, next, err)
		}
		got := 0
		for m, err := range msgs {
			if err != nil {
				if errors.Is(err, jetstreamext.ErrNoMessages) {
					return nil
				}
				return fmt.Errorf("read %s %s from %d: %w", s.cfg.Stream, filter, next, err)
			}
			if m.Sequence > to {
				return nil
			}
			got++
			next = m.Sequence + 1
			if err := fn(s.decode(m.Subject, m.Sequence, m.Header, m.Data)); err != nil {
				return err
			}
		}
		if got == 0 {
			return nil
		}
	}
	return nil
}
