package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// A start whose reads of the log cannot go on yet waits instead of ending
// the process, for a restart would only meet the same condition:
//   - its catch-up read meets the stream's consumer limit held by others
//     (the store has freed this replica's own stale readers already): the
//     others' consumers expire or are deleted by an operator;
//   - JetStream does not answer (eventlog.Unanswered): a cluster that has
//     just formed and is still placing streams, or a stream without a
//     leader while its replicas come back.
// While it waits the reader is down with the cause as its reason, so
// readiness names it; one warning says the start waits, one line a minute
// that it still does, one line that it goes on.

// startWaitProgress is how often a start that waits says it still does.
const startWaitProgress = time.Minute

// startWait is one of Start's waits: backoff on the runner's clock and the
// lines and reader status that tell an operator about it.
type startWait struct {
	r                   *Runner
	wait                time.Duration
	began, nextProgress time.Time
	attempts            int
	ended               string // the line that says the start goes on
}

// the reason a start waits on err, with the lines it logs; ok is false
// when err is not a reason to wait.
type startWaitReason struct {
	status, first, still, ended string
	attrs                       []any
}

func startWaitFor(err error) (startWaitReason, bool) {
	var le *eventlog.ConsumerLimitError
	switch {
	case errors.As(err, &le):
		return startWaitReason{
			status: "the views cannot start reading the log: " + le.Error(),
			first:  "the start waits for a consumer of the log: the stream's consumer limit is reached by consumers that are not this replica's; trying again until one can be created",
			still:  "the start still waits for a consumer of the log",
			ended:  "a consumer of the log was created; the start goes on",
			attrs:  []any{"stream", le.Stream, "consumers", le.Consumers, "limit", le.Limit, "not_readers", le.Others},
		}, true
	case eventlog.Unanswered(err):
		return startWaitReason{
			status: "the views cannot start: the event log does not answer yet: " + err.Error(),
			first:  "the start waits for the event log to answer; asking again until it does",
			still:  "the start still waits for the event log to answer",
			ended:  "the event log answered; the start goes on",
		}, true
	}
	return startWaitReason{}, false
}

// again decides after an attempt that failed with err: it waits its
// backoff and returns nil to try again, or returns the error that ends the
// start. where names the attempt in the log lines.
func (w *startWait) again(ctx context.Context, err error, where ...any) error {
	why, ok := startWaitFor(err)
	if !ok || ctx.Err() != nil {
		return err
	}
	r := w.r
	now := r.clock.Now()
	w.attempts++
	w.ended = why.ended
	r.reader.mu.Lock()
	r.reader.attempts = w.attempts
	r.reader.status.Reason = why.status
	if !r.reader.status.Down {
		r.reader.status.Down, r.reader.status.Since = true, now
	}
	r.reader.mu.Unlock()
	switch {
	case w.attempts == 1:
		w.began, w.nextProgress = now, now.Add(startWaitProgress)
		r.log.Warn(why.first, append(append(why.attrs, where...), "err", err)...)
	case !now.Before(w.nextProgress):
		w.nextProgress = now.Add(startWaitProgress)
		r.log.Info(why.still, append(why.attrs, "waited", now.Sub(w.began).Round(time.Second), "attempts", w.attempts, "err", err)...)
	}
	if w.wait == 0 {
		w.wait = readerRetryFirst
	}
	t := r.clock.NewTimer(w.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting at start: %w", errors.Join(ctx.Err(), err))
	case <-t.C():
	}
	w.wait = min(w.wait*2, readerRetryMax)
	return nil
}

// done marks the reader up after the start's wait, in one line; nothing
// when the start did not wait.
func (w *startWait) done(where ...any) {
	if w.attempts == 0 {
		return
	}
	r := w.r
	r.reader.mu.Lock()
	r.reader.status = ReaderStatus{Restarts: r.reader.status.Restarts}
	r.reader.attempts = 0
	r.reader.mu.Unlock()
	r.log.Info(w.ended, append(where, "waited", r.clock.Since(w.began).Round(time.Millisecond), "attempts", w.attempts+1)...)
}

// boundsAtStart reads the log's bounds, waiting while JetStream does not
// answer. w is the start's one wait: readAtStart ends it.
func (r *Runner) boundsAtStart(ctx context.Context, w *startWait) (eventlog.Bounds, error) {
	for {
		b, err := r.store.Bounds(ctx)
		if err == nil {
			return b, nil
		}
		if err := w.again(ctx, err); err != nil {
			return b, err
		}
	}
}

// readAtStart is Start's catch-up read of (from, last], waiting while the
// stream's consumer limit refuses its consumer or JetStream does not
// answer. fold gets every event; from is recomputed by next after a
// failed attempt, as a read may have folded events before it failed. It
// ends the start's wait (w), begun by boundsAtStart or by itself: one
// warning and one line that the start goes on, however many times the
// start waited.
func (r *Runner) readAtStart(ctx context.Context, w *startWait, next func() uint64, last uint64, fold func(events.Event) error) error {
	for {
		from := next()
		err := r.store.Read(eventlog.PriorityRead(ctx), from, last, fold)
		if err == nil {
			w.done("from", from)
			return nil
		}
		if err := w.again(ctx, err, "from", from); err != nil {
			return err
		}
	}
}
