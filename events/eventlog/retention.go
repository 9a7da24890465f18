package eventlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/claimstream/claimstream/events"
)

// Bounds is the span of sequences the log holds: events before First
// expired (MaxAge) or never were; Last is the newest. An empty log that
// once held events has First = Last+1.
type Bounds struct {
	First, Last uint64
}

// Truncated is true when events before First are gone from the log.
func (b Bounds) Truncated() bool { return b.First > 1 }

// Bounds reads the log's first and last sequence.
func (s *Store) Bounds(ctx context.Context) (Bounds, error) {
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return Bounds{}, fmt.Errorf("stream %s: %w", s.cfg.Stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return Bounds{}, fmt.Errorf("stream %s info: %w", s.cfg.Stream, err)
	}
	b := Bounds{First: info.State.FirstSeq, Last: info.State.LastSeq}
	if b.First == 0 {
		b.First = 1
	}
	return b, nil
}

// Replicas is the replica count of the stream (checkpoints are kept with
// as many).
func (s *Store) Replicas() int { return s.cfg.Replicas }

// expiredExpectations answers a conflict met because the events a write
// expects expired: the server then knows no event of the aggregate and
// says its last sequence is 0. When every event of the aggregate up to the
// expected one is older than the log's first, "nothing since Expected" is
// "nothing left in the log", so the writes are returned with those
// expectations set to 0 for one more try; nil when the conflict is real.
func (s *Store) expiredExpectations(ctx context.Context, err error, writes []events.Write) []events.Write {
	if !errors.Is(err, ErrConflict) {
		return nil
	}
	b, berr := s.Bounds(ctx)
	if berr != nil || !b.Truncated() {
		return nil
	}
	again := make([]events.Write, len(writes))
	changed := false
	for i, w := range writes {
		again[i] = w
		if w.Expected > 0 && w.Expected < b.First {
			again[i].Expected = 0
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return again
}
