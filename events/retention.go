package events

import (
	"context"
	"fmt"
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
