package serve

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/sim"
)

// resumeSimClock moves a simulator's sped-up clock to the time of the
// log's last event when that is later than the wall clock: a previous
// simulated run wrote events ahead of the wall clock, and a clock restarted
// from the wall clock would write new events before them and show negative
// ages. A real clock, or a log that cannot be read, is left as it is.
func resumeSimClock(ctx context.Context, clk clock.Clock, store *eventlog.Store, log *slog.Logger) {
	sc, ok := clk.(*sim.ScaledClock)
	if !ok {
		return
	}
	last, err := store.LastSeq(ctx)
	if err != nil || last == 0 {
		return
	}
	// A get, not a read: no consumer, so the stream's consumer limit
	// does not stop it.
	e, err := store.Get(ctx, last)
	if err != nil {
		return
	}
	if at := e.Time; at.After(sc.Now()) {
		sc.ResumeFrom(at)
		log.Info("simulated clock resumes from the log's last event, ahead of the wall clock", "at", at.UTC().Format(time.RFC3339), "seq", last)
	}
}
