package projections

import (
	"context"

	"github.com/claimstream/claimstream/events"
)

// Follower is what a read model kept beside the views (the cost index, the
// timeline index) gives Follow: how it catches up with the views, and how
// it keeps its saved copies. The loop is the same for every such model;
// only these differ.
type Follower struct {
	// CatchUp brings the model up to the views: the first call builds it
	// (from a saved copy, a checkpoint or the log), later ones apply what
	// the views folded since, or read it from the log. Its error is why the
	// model cannot answer now.
	CatchUp func(ctx context.Context) error
	// Fed, when set, is handed each event the views fold, as they fold it;
	// it must not block.
	Fed func(events.Event)
	// Copies, when set, are the model's saved copies: SaveCopy runs after
	// every catch-up that succeeded, and once more, forced, in bounded time
	// as Follow ends.
	Copies   *IndexCopies
	SaveCopy func(ctx context.Context, force bool)
	// Failing is told once when catching up starts failing, and Recovered
	// once when it succeeds again: a failing model logs one line per
	// streak, not one per event.
	Failing   func(err error)
	Recovered func()
}

// Follow keeps a read model current until ctx ends: it catches up now (the
// start-up build, in the background of serve's other work), then after
// each batch of events views folds (views nil: only now). Many events
// folded between two catch-ups make one wake-up.
func Follow(ctx context.Context, views *Runner, f Follower) error {
	wake := make(chan struct{}, 1)
	if views != nil {
		defer views.Subscribe(func(e events.Event) {
			if f.Fed != nil {
				f.Fed(e)
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		})()
	}
	failing := false
	for {
		err := f.CatchUp(ctx)
		if err == nil && f.SaveCopy != nil {
			f.SaveCopy(ctx, false)
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			// Once per streak; the next event retries.
			if f.Failing != nil {
				f.Failing(err)
			}
			failing = true
		case err == nil && failing:
			if f.Recovered != nil {
				f.Recovered()
			}
			failing = false
		}
		select {
		case <-ctx.Done():
			if f.Copies != nil && f.SaveCopy != nil {
				f.Copies.SaveAtShutdown(ctx, func(ctx context.Context) { f.SaveCopy(ctx, true) })
			}
			return nil
		case <-wake:
		}
	}
}
