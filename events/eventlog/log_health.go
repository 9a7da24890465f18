package eventlog

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// ErrLogUnwritable is matched (errors.Is) by every append refused because
// the event log cannot be written now (disk full, JetStream disabled by a
// storage error). Nothing was written; the caller may retry later.
var ErrLogUnwritable = errors.New("event log cannot be written")

// LogUnwritableError is the refusal, with the reason in an operator's words.
type LogUnwritableError struct{ Reason string }

func (e *LogUnwritableError) Error() string { return "event log cannot be written: " + e.Reason }

// Is makes errors.Is(err, ErrLogUnwritable) true.
func (e *LogUnwritableError) Is(target error) bool { return target == ErrLogUnwritable }

// LogStatus is whether the log can be written, and if not why and since when.
type LogStatus struct {
	Writable bool
	Reason   string
	Since    time.Time
	// ServerFault: the server itself refuses writes (a store write error,
	// JetStream down), so an append already sent will not be answered.
	// Otherwise the log is refused for want of free space, before any write
	// fails, and appends already sent complete normally.
	ServerFault bool
}

// Reasons a write to the log failed, the label of the failure counter.
const (
	WriteFailureUnwritable = "unwritable" // refused at once: the log was known unwritable
	WriteFailureNoSpace    = "no_space"
	WriteFailureNoResponse = "no_response" // the server never answered (a store write error)
	WriteFailureJetStream  = "jetstream_unavailable"
	WriteFailureOther      = "other"
)

// LogHealth is the shared flag that says whether the log can be written.
// The LogMonitor sets it; the Store reads it before every append (refusing
// at once, instead of waiting out a server that will never answer) and
// reports failed appends to it; readiness and metrics show it.
type LogHealth struct {
	mu       sync.Mutex
	status   LogStatus
	changed  chan struct{} // closed and replaced on every change
	failures map[string]uint64
	resends  uint64
	kick     chan struct{}
	// faults counts the server faults seen; lastFault is the newest one's
	// reason. An append that fails across one is failed by it.
	faults    uint64
	lastFault string
}

// NewLogHealth starts writable.
func NewLogHealth(now time.Time) *LogHealth {
	return &LogHealth{
		status:   LogStatus{Writable: true, Since: now},
		changed:  make(chan struct{}),
		failures: map[string]uint64{},
		kick:     make(chan struct{}, 1),
	}
}

// Status is the current status.
func (h *LogHealth) Status() LogStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status
}

// Err is nil while the log can be written, else a *LogUnwritableError.
func (h *LogHealth) Err() error {
	if h == nil {
		return nil
	}
	st := h.Status()
	if st.Writable {
		return nil
	}
	return &LogUnwritableError{Reason: st.Reason}
}

// WriteFailures counts failed appends by reason since start.
func (h *LogHealth) WriteFailures() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]uint64, len(h.failures))
	for k, v := range h.failures {
		out[k] = v
	}
	return out
}

// Resends counts the tries of appends sent again since start because the
// try before got no answer (Store: AnswerWait).
func (h *LogHealth) Resends() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resends
}

// unanswered counts a try left unanswered and asks the monitor to look now:
// a server that stopped answering may have a store fault.
func (h *LogHealth) unanswered() {
	h.mu.Lock()
	h.resends++
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Set changes the status; it reports whether anything changed. The
// LogMonitor calls it.
func (h *LogHealth) Set(writable bool, reason string, serverFault bool, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.status.Writable == writable && h.status.Reason == reason && h.status.ServerFault == serverFault {
		return false
	}
	since := h.status.Since
	if h.status.Writable != writable {
		since = now
	}
	h.status = LogStatus{Writable: writable, Reason: reason, ServerFault: serverFault, Since: since}
	if serverFault {
		h.faults++
		h.lastFault = reason
	}
	close(h.changed)
	h.changed = make(chan struct{})
	return true
}

// Kicks receives when an append failed or went unanswered: the LogMonitor
// looks at once instead of at its next tick.
func (h *LogHealth) Kicks() <-chan struct{} { return h.kick }

func (h *LogHealth) changes() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// failed counts a failed append and asks the monitor to look now, unless
// the append was refused for a fault the monitor already knows.
func (h *LogHealth) failed(reason string) {
	h.mu.Lock()
	h.failures[reason]++
	h.mu.Unlock()
	if reason == WriteFailureUnwritable {
		return
	}
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// guard returns ctx cancelled with the refusal as its cause as soon as the
// server is seen to refuse writes: an append it will never answer ends when
// the monitor sees the fault, not at the caller's deadline. A refusal for
// want of space alone leaves appends already sent to complete.
func (h *LogHealth) guard(ctx context.Context) (context.Context, func()) {
	h.mu.Lock()
	ctx = context.WithValue(ctx, faultsAtStart{}, h.faults)
	h.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		for {
			ch := h.changes()
			if st := h.Status(); !st.Writable && st.ServerFault {
				cancel(&LogUnwritableError{Reason: st.Reason})
				return
			}
			select {
			case <-ch:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

type faultsAtStart struct{}

// faultDuring is the refusal of the server fault seen while the append of
// ctx (from guard) was under way, or nil: the fault (and the restart of
// JetStream that follows it) is why it failed, whatever error it met.
func (h *LogHealth) faultDuring(ctx context.Context) error {
	n, ok := ctx.Value(faultsAtStart{}).(uint64)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok || h.faults == n {
		return nil
	}
	return &LogUnwritableError{Reason: h.lastFault}
}

// classifyWriteFailure names why an append failed, for the counter.
func classifyWriteFailure(err error) string {
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, ErrLogUnwritable):
		return WriteFailureUnwritable
	case strings.Contains(msg, "no space left"), strings.Contains(msg, "resources exceeded"), strings.Contains(msg, "insufficient resources"):
		return WriteFailureNoSpace
	case errors.Is(err, context.DeadlineExceeded), strings.Contains(msg, "timeout"):
		return WriteFailureNoResponse
	case strings.Contains(msg, "jetstream not enabled"), strings.Contains(msg, "no responders"):
		return WriteFailureJetStream
	}
	return WriteFailureOther
}
