package rest

import (
	"context"
	"fmt"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/provider/audit"
)

// claimExpiry says what is known of a claim whose history starts before
// the log does: nil when evs hold the claim's creation or the log is whole
// (the story is complete).
func (s *server) claimExpiry(ctx context.Context, claim string, evs []events.Event) (*audit.Expiry, error) {
	if audit.HasCreation(evs, claim) {
		return nil, nil
	}
	b, err := s.store.Bounds(ctx)
	if err != nil || !b.Truncated() {
		return nil, err
	}
	x := &audit.Expiry{FirstSeq: b.First}
	if b.First <= b.Last {
		e, err := s.store.Get(ctx, b.First)
		if err != nil {
			return nil, fmt.Errorf("the log's first event: %w", err)
		}
		x.FirstAt = e.Time
	}
	if cps := s.views.Checkpoints(); cps != nil {
		st, info, err := cps.OldestCovering(ctx, b)
		if err != nil {
			return nil, err
		}
		if st != nil {
			x.Checkpoint, x.Claim = info, st.Claims[claim]
		}
	}
	return x, nil
}
