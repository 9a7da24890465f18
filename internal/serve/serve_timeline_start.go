package serve

import (
	"context"
	"runtime"
	"time"
)

// timelineLoadWait bounds how long the start-up memory's release waits for
// the timeline index's first build: a load from its saved copy takes a
// fraction of a second, a build from a month of the log can take minutes.
const timelineLoadWait = 10 * time.Second

// startTimelineIndex starts the dashboard's timeline index (REST API on)
// once serve is serving: its first build (its saved copy's decode, or the
// log's month) then does not add to the start's peak, the views' snapshot
// and the pool file's parse. It returns a channel closed when the build
// ended or timelineLoadWait passed (nil without the REST API).
func (p *plane) startTimelineIndex(intake *stage) <-chan struct{} {
	if p.timelines == nil {
		return nil
	}
	intake.Go("timeline index", func(ctx context.Context) error {
		// The start's garbage (the snapshot's decode, the pool file's
		// parse) is collected before the copy is decoded, so the two do
		// not add up to the process's peak.
		runtime.GC()
		return p.timelines.Run(ctx, p.views)
	})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		select {
		case <-p.timelines.FirstBuild():
		case <-time.After(timelineLoadWait):
		}
	}()
	return loaded
}
