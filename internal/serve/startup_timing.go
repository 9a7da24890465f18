package serve

import (
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// startupTimer logs one line per start-up phase of serve ("start-up
// phase", phase, took, since start), so a slow start shows where it goes:
// the pool file, the embedded server and its JetStream recovery, the event
// log, the snapshot, the catch-up, the pool apply. A nil timer logs nothing
// (tests that start a plane without serve).
type startupTimer struct {
	log   *slog.Logger
	clock clock.PassiveClock
	began time.Time
	last  time.Time
}

// newStartupTimer starts timing now. clk is the wall clock, never the
// simulator's: the phases are real time.
func newStartupTimer(log *slog.Logger, clk clock.PassiveClock) *startupTimer {
	now := clk.Now()
	return &startupTimer{log: log, clock: clk, began: now, last: now}
}

// done logs that phase ended now, with its duration since the previous one.
func (t *startupTimer) done(phase string, attrs ...any) {
	if t == nil {
		return
	}
	now := t.clock.Now()
	attrs = append([]any{"phase", phase, "took", now.Sub(t.last).Round(time.Millisecond), "since_start", now.Sub(t.began).Round(time.Millisecond)}, attrs...)
	t.last = now
	t.log.Info("start-up phase", attrs...)
}
