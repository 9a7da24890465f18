package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// eventQuery is the filter of /api/v1/events and /api/v1/events/export.
type eventQuery struct {
	slot, claim, group string
	types              []events.Type
	since, until       time.Time
	from               uint64
	last               int
	follow             bool
}

func parseEventQuery(r *http.Request) (eventQuery, error) {
	q := r.URL.Query()
	eq := eventQuery{slot: q.Get("slot"), claim: q.Get("claim"), group: q.Get("group"), follow: q.Get("follow") == "true"}
	if t := q.Get("type"); t != "" {
		for _, name := range strings.Split(t, ",") {
			ty := events.Type(strings.TrimSpace(name))
			if !events.Known(ty) {
				return eq, fmt.Errorf("type: %q is not an event type (one of %v)", ty, events.Types())
			}
			eq.types = append(eq.types, ty)
		}
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"since", &eq.since}, {"until", &eq.until}} {
		if v := q.Get(f.name); v != "" {
			tm, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return eq, fmt.Errorf("%s: want an RFC 3339 time such as 2026-03-04T03:12:00Z: %v", f.name, err)
			}
			*f.dst = tm
		}
	}
	if !eq.since.IsZero() && !eq.until.IsZero() && eq.since.After(eq.until) {
		return eq, fmt.Errorf("since %s is after until %s: the range is reversed (no event can match); swap them", eq.since.Format(time.RFC3339Nano), eq.until.Format(time.RFC3339Nano))
	}
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return eq, fmt.Errorf("from: want a sequence number: %v", err)
		}
		eq.from = n
	}
	if v := q.Get("last"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return eq, fmt.Errorf("last: want a count")
		}
		eq.last = n
	}
	return eq, nil
}

func (q eventQuery) match(e events.Event) bool {
	if e.Seq < q.from {
		return false
	}
	if len(q.types) > 0 && !slices.Contains(q.types, e.Type) {
		return false
	}
	if !q.since.IsZero() && e.Time.Before(q.since) {
		return false
	}
	if !q.until.IsZero() && e.Time.After(q.until) {
		return false
	}
	if q.slot != "" && (e.Aggregate.Kind != events.KindSlot || e.Aggregate.Name != q.slot) {
		return false
	}
	var ref events.Ref
	if e.Data != nil {
		ref = e.Data.Reference()
	}
	if q.claim != "" && ref.Claim != q.claim {
		return false
	}
	if q.group != "" && ref.Group != q.group && !(e.Aggregate.Kind == events.KindGroup && e.Aggregate.Name == q.group) {
		return false
	}
	return true
}

// scan calls fn for every matching event up to the log's last sequence at
// the time of the call (returned), reading as little of the log as the
// filter allows: one slot's subjects, one type's subjects, or the tail.
func (s *server) scan(ctx context.Context, q eventQuery, fn func(events.Event) error) (uint64, error) {
	last, err := s.store.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	slot := q.slot
	if slot == "" && q.claim != "" {
		// A live claim's slot is in the views; else the whole log is read.
		s.views.Read(func(st *projections.State) {
			if c := st.Claims[q.claim]; c != nil {
				slot = c.Slot
			}
		})
	}
	// With last=N, keep the N newest matches.
	var ring []events.Event
	emit := func(e events.Event) error {
		if e.Seq > last || !q.match(e) {
			return nil
		}
		if q.last > 0 {
			ring = append(ring, e)
			if len(ring) > q.last {
				ring = ring[1:]
			}
			return nil
		}
		return fn(e)
	}
	subj := s.store.Subjects()
	switch {
	case slot != "":
		if q.slot != "" && q.slot != slot {
			return last, nil
		}
		err = s.store.ReadFiltered(ctx, subj.Filter(events.SlotAggregate(slot)), q.from, emit)
	case len(q.types) == 1:
		kind, _ := events.KindOf(q.types[0])
		err = s.store.ReadFiltered(ctx, subj.TypeFilter(kind, q.types[0]), q.from, emit)
	default:
		from := q.from
		if q.last > 0 && q.group == "" && q.claim == "" && len(q.types) == 0 && q.since.IsZero() && q.until.IsZero() && last > uint64(q.last) {
			from = max(from, last-uint64(q.last)+1)
		}
		if from <= last {
			err = s.store.Read(ctx, from, last, emit)
		}
		if gaps := eventlog.GapsOf(err); gaps != nil {
			// A damaged log is listed as it is: the operator reads
			// around the gap the views and the log line name.
			s.log.Warn("listing a log with a gap", "missing", gaps.String())
			err = nil
		}
	}
	if err != nil {
		return last, err
	}
	for _, e := range ring {
		if err := fn(e); err != nil {
			return last, err
		}
	}
	return last, nil
}

// stream writes matching events as JSON lines, then, with follow=true,
// keeps writing new ones as they are appended until the client goes away.
// A read that fails before the first page went out is answered with an
// error status; after it, with an error line, and the answer is cut.
func (s *server) stream(w http.ResponseWriter, r *http.Request, encode func(events.Event) ([]byte, error)) {
	q, err := parseEventQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", err.Error())
		return
	}
	rc := http.NewResponseController(w)
	// A listing is streamed: it lasts as long as the log is long (with
	// follow, as long as the client reads it), not the write timeout.
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	out := &pagedWriter{w: w}
	write := func(e events.Event) error {
		b, err := encode(e)
		if err != nil {
			// An entry that cannot be encoded (no data) is left out of an
			// export; the plain listing shows it with its error.
			return nil
		}
		if _, err := out.Write(append(b, '\n')); err != nil {
			return errClientGone{err}
		}
		return nil
	}
	ctx := r.Context()
	last, err := s.scan(ctx, q, write)
	if err != nil {
		s.streamFailed(w, r, out, err)
		return
	}
	if err := out.commit(); err != nil {
		return
	}
	if !q.follow {
		return
	}
	_ = rc.Flush()
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
		s.streamFailed(w, r, out, err)
	}
}

// errClientGone is a write to the client that failed: the client went
// away, nothing to tell it.
type errClientGone struct{ err error }

func (e errClientGone) Error() string { return "writing the answer: " + e.err.Error() }
func (e errClientGone) Unwrap() error { return e.err }

// streamFailed ends a JSON Lines answer whose read failed: an error
// status if nothing went out yet, else an error line and a cut.
func (s *server) streamFailed(w http.ResponseWriter, r *http.Request, out *pagedWriter, err error) {
	var gone errClientGone
	if errors.As(err, &gone) || r.Context().Err() != nil {
		return
	}
	if !out.committed {
		s.readFailed(w, r, "events", err)
		return
	}
	s.abortStream(w, r, "events", err, ndjsonError)
}

func (s *server) listEvents(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, events.MarshalStructured)
}

// exportEvents writes CloudEvents in structured mode, one JSON object per
// line, with the stream sequence as the "sequence" extension: the listing's
// shape, without the entries that cannot be read.
func (s *server) exportEvents(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, func(e events.Event) ([]byte, error) {
		if e.Data == nil {
			return nil, errors.New("unreadable entry")
		}
		return events.MarshalStructured(e)
	})
}
