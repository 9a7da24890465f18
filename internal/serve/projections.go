package serve

import (
	"context"

	"github.com/claimstream/claimstream/projections/cost"
	"github.com/claimstream/claimstream/projections/timeline"
)

// registerProjections adds the read models folded with the views, before
// their start: the cost index (the cost report and the cost counters,
// REST API on or off) and, with the REST API, the dashboard's timeline
// index. The views' snapshot holds their parts, so a start reads the
// log's history once for all of them.
func (p *plane) registerProjections(ctx context.Context, o serveOptions) error {
	var err error
	if p.costs, err = cost.NewRunner(ctx, p.views, p.store, o.dataDir); err != nil {
		return err
	}
	if o.apiAddress != "" {
		if p.timelines, err = timeline.NewIndex(ctx, p.views, p.store, o.dataDir); err != nil {
			return err
		}
	}
	return nil
}
