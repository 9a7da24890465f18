package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// A start whose read of the log meets the stream's consumer limit held by
// others (the store has freed this replica's own stale readers already)
// waits for a consumer instead of ending the process: a restart would meet
// the same limit, and the others' consumers expire or are deleted by an
// operator. While it waits the reader is down with the cause as its
// reason, so readiness names it.

// startWaitProgress is how often a start that waits for a consumer says it
// still does.
const startWaitProgress = time.Minute

// readAtStart is Start's catch-up read of (from, last], retried with
// backoff on the runner's clock while the stream's consumer limit refuses
// its consumer. fold gets every event; from is recomputed by next after a
// refusal, as a read may have folded events before it failed.
func (r *Runner) readAtStart(ctx context.Context, next func() uint64, last uint64, fold func(events.Event) error) error {
	wait := readerRetryFirst
	var began, nextProgress time.Time
	attempts := 0
	for {
		from := next()
		err := r.store.Read(eventlog.PriorityRead(ctx), from, last, fold)
		var le *eventlog.ConsumerLimitError
		if !errors.As(err, &le) {
			if attempts > 0 && err == nil {
				r.startWaitEnded(from, began, attempts)
			}
			return err
		}
		now := r.clock.Now()
		attempts++
		r.reader.mu.Lock()
		r.reader.attempts = attempts
		r.reader.status.Reason = "the views cannot start reading the log: " + le.Error()
		if !r.reader.status.Down {
			r.reader.status.Down, r.reader.status.Since = true, now
		}
		r.reader.mu.Unlock()
		switch {
		case attempts == 1:
			began, nextProgress = now, now.Add(startWaitProgress)
			r.log.Warn("the start waits for a consumer of the log: the stream's consumer limit is reached by consumers that are not this replica's; trying again until one can be created",
				"stream", le.Stream, "consumers", le.Consumers, "limit", le.Limit, "not_readers", le.Others, "from", from, "err", err)
		case !now.Before(nextProgress):
			nextProgress = now.Add(startWaitProgress)
			r.log.Info("the start still waits for a consumer of the log", "stream", le.Stream, "consumers", le.Consumers, "limit", le.Limit,
				"not_readers", le.Others, "waited", now.Sub(began).Round(time.Second), "attempts", attempts)
		}
		t := r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for a consumer of the log: %w", errors.Join(ctx.Err(), err))
		case <-t.C():
		}
		wait = min(wait*2, readerRetryMax)
	}
}

// startWaitEnded marks the reader up after a start's wait, in one line.
func (r *Runner) startWaitEnded(from uint64, began time.Time, attempts int) {
	r.reader.mu.Lock()
	defer r.reader.mu.Unlock()
	r.reader.status = ReaderStatus{Restarts: r.reader.status.Restarts}
	r.reader.attempts = 0
	r.log.Info("a consumer of the log was created; the start goes on", "from", from,
		"waited", r.clock.Since(began).Round(time.Millisecond), "attempts", attempts+1)
}
