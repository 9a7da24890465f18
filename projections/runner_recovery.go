package projections

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// The views' reader of the log (a JetStream consumer) can fail: its
// consumer deleted, the stream's leader gone with quorum, the server
// restarting JetStream. The runner then re-creates it from the last folded
// sequence, with backoff, instead of ending; while it is down the views
// are not current (CaughtUp says so, and so does /readyz).

// Reader backoff between attempts to re-create the views' consumer.
const (
	readerRetryFirst = 100 * time.Millisecond
	readerRetryMax   = 5 * time.Second
)

// ReaderStatus is the state of the views' reader of the log.
type ReaderStatus struct {
	// Down: the reader failed and is not re-created yet.
	Down bool
	// Reason is the failure, in words, while Down.
	Reason string
	// Since is when it went down.
	Since time.Time
	// Restarts counts the reader's re-creations since start.
	Restarts uint64
}

type readerState struct {
	mu     sync.Mutex
	status ReaderStatus
	// attempts in this incident; 0 while up.
	attempts int
}

// ReaderStatus is the state of the views' reader.
func (r *Runner) ReaderStatus() ReaderStatus {
	r.reader.mu.Lock()
	defer r.reader.mu.Unlock()
	return r.reader.status
}

// readerFailed marks the reader down; the first failure of an incident is
// logged as a warning, later attempts at debug level.
func (r *Runner) readerFailed(err error, from uint64, now time.Time) {
	r.reader.mu.Lock()
	defer r.reader.mu.Unlock()
	r.reader.attempts++
	if !r.reader.status.Down {
		r.reader.status.Down, r.reader.status.Since = true, now
		r.reader.status.Reason = fmt.Sprintf("the views' reader of the log stopped: %v", err)
		r.log.Warn("views' reader of the log stopped; re-creating it from the last folded event until it works", "from", from, "err", err)
		return
	}
	r.reader.status.Reason = fmt.Sprintf("the views' reader of the log stopped: %v", err)
	r.log.Debug("views' reader of the log not re-created yet", "from", from, "attempt", r.reader.attempts, "err", err)
}

// readerStarted marks the reader up again, and logs the end of the
// incident once.
func (r *Runner) readerStarted(from uint64, now time.Time) {
	r.reader.mu.Lock()
	defer r.reader.mu.Unlock()
	if !r.reader.status.Down {
		return
	}
	r.log.Info("views' reader of the log resumed", "from", from, "down", now.Sub(r.reader.status.Since).Round(time.Millisecond), "attempts", r.reader.attempts)
	r.reader.status = ReaderStatus{Restarts: r.reader.status.Restarts + 1}
	r.reader.attempts = 0
}

// tailRecovering folds the log's new events into the views until ctx ends,
// re-creating the reader after every failure.
func (r *Runner) tailRecovering(ctx context.Context, clk clock.Clock, fold func(events.Event) error) error {
	wait := readerRetryFirst
	for {
		from := r.Seq() + 1
		err := r.store.TailWith(eventlog.PriorityRead(ctx), from, func() {
			r.readerStarted(from, clk.Now())
			wait = readerRetryFirst
		}, fold)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("reader ended")
		}
		r.readerFailed(err, from, clk.Now())
		t := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		wait = min(wait*2, readerRetryMax)
	}
}
