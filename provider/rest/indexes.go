package rest

import (
	"context"

	"github.com/claimstream/claimstream/projections/cost"
	"github.com/claimstream/claimstream/projections/timeline"
)

// timelineIndex is the timeline index: Options.Timeline, or one built now
// from the log and registered with the views (a handler built without).
func (s *server) timelineIndex(ctx context.Context) (*timeline.Index, error) {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	if s.timelines == nil {
		x, err := timeline.NewIndex(ctx, s.views, s.store, "")
		if err != nil {
			return nil, err
		}
		s.timelines = x
	}
	return s.timelines, nil
}

// costIndex is the cost index: Options.Cost, or one built now from the
// log and registered with the views.
func (s *server) costIndex(ctx context.Context) (*cost.Runner, error) {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	if s.costs == nil {
		x, err := cost.NewRunner(ctx, s.views, s.store, "")
		if err != nil {
			return nil, err
		}
		s.costs = x
	}
	return s.costs, nil
}
