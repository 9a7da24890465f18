package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/claimstream/claimstream/events"
)

// sseEvents serves the log as server-sent events (the dashboard's live
// feed): the matching events from ?from= (or the ?last= newest; with
// neither, none of the past), then every new one as it is appended, until the client goes away. Each
// message's id is the event's log sequence, so a browser that reconnects
// sends it back as Last-Event-ID and resumes right after it, missing
// nothing and repeating nothing.
func (s *server) sseEvents(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", err.Error())
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		seq, err := parseLastEventID(id)
		if err != nil {
			writeError(w, http.StatusBadRequest, "InvalidArgument", err.Error())
			return
		}
		// Resuming: everything after the last event the client saw.
		q.from, q.last = seq+1, 0
	}
	rc := http.NewResponseController(w)
	// The stream lasts as long as the client reads it.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	// A buffering proxy would hold the stream back.
	h.Set("X-Accel-Buffering", "no")
	// The past events are held back (up to a page) until read whole, so
	// a read that fails at once is answered with an error status.
	out := &pagedWriter{w: w}
	// The client waits 2 s before reconnecting after a cut.
	_, _ = fmt.Fprint(out, "retry: 2000\n\n")
	write := func(e events.Event) error {
		if _, err := out.Write(sseMessage(e)); err != nil {
			return errClientGone{err}
		}
		return nil
	}
	ctx := r.Context()
	var last uint64
	if q.from == 0 && q.last == 0 {
		// Neither a start nor a count: only what is appended from now on.
		last, err = s.store.LastSeq(ctx)
	} else {
		last, err = s.scan(ctx, q, write)
	}
	if err != nil {
		s.sseFailed(w, r, out, err)
		return
	}
	if err := out.commit(); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	err = s.store.Tail(ctx, max(last+1, q.from), func(e events.Event) error {
		if !q.match(e) {
			return nil
		}
		if err := write(e); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return errClientGone{err}
		}
		return nil
	})
	if err != nil {
		s.sseFailed(w, r, out, err)
	}
}

// sseFailed ends an event stream whose read failed: an error status if
// nothing went out yet, else a log-error event and a cut (the browser
// reconnects and resumes from the last id it got).
func (s *server) sseFailed(w http.ResponseWriter, r *http.Request, out *pagedWriter, err error) {
	var gone errClientGone
	if errors.As(err, &gone) || r.Context().Err() != nil {
		return
	}
	if !out.committed {
		s.readFailed(w, r, "event stream", err)
		return
	}
	s.abortStream(w, r, "event stream", err, sseError)
}

// sseMessage is one event as a server-sent event: its sequence as the id,
// its API object as the data (JSON has no raw newline, so one data line).
func sseMessage(e events.Event) []byte {
	b, err := json.Marshal(EventOf(e))
	if err != nil {
		b = []byte(`{"seq":` + seqString(e.Seq) + `,"error":"cannot encode"}`)
	}
	out := make([]byte, 0, len(b)+32)
	out = append(out, "id: "...)
	out = strconv.AppendUint(out, e.Seq, 10)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// parseLastEventID reads the Last-Event-ID header a reconnecting browser
// sends: the sequence of the last event it got.
func parseLastEventID(v string) (uint64, error) {
	seq, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("Last-Event-ID: want the sequence number of the last event received, got %q", v)
	}
	return seq, nil
}
