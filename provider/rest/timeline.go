package rest

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/claimstream/claimstream/projections/timeline"
)

// timelineWindow reads ?since= and ?until= (RFC 3339; until defaults to
// now, since to an hour before until).
func timelineWindow(r *http.Request, now time.Time) (since, until time.Time, err error) {
	q := r.URL.Query()
	until = now
	if v := q.Get("until"); v != "" {
		if until, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return since, until, fmt.Errorf("until: want an RFC 3339 time such as 2026-03-04T03:12:00Z: %v", err)
		}
	}
	since = until.Add(-timeline.DefaultWindow)
	if v := q.Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return since, until, fmt.Errorf("since: want an RFC 3339 time such as 2026-03-04T03:12:00Z: %v", err)
		}
	}
	if !since.Before(until) {
		return since, until, fmt.Errorf("since (%s) must be before until (%s)", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	if until.Sub(since) > timeline.MaxWindow {
		return since, until, fmt.Errorf("the window %s is longer than %s; narrow since/until", until.Sub(since), timeline.MaxWindow)
	}
	return since.UTC(), until.UTC(), nil
}

func (s *server) timeline(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	since, until, err := timelineWindow(r, now)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", err.Error())
		return
	}
	idx, err := s.timelineIndex(r.Context())
	var tl timeline.Timeline
	if err == nil {
		tl, err = idx.Timeline(r.Context(), since, until, now)
	}
	if err != nil {
		// Before what the index holds, or an index that cannot be built:
		// fold the window from the log.
		tl, err = timeline.Build(r.Context(), s.store, s.views.Checkpoints(), since, until, now)
	}
	if s.foldFailed(w, r, err, "draw a timeline") {
		return
	}
	writeMaybeGzip(w, r, tl)
}

// writeMaybeGzip writes v as JSON, gzipped when the client takes it (a
// week of 1,000 slots is megabytes of numbers, which compress well).
func writeMaybeGzip(w http.ResponseWriter, r *http.Request, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(v)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.WriteHeader(http.StatusOK)
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	_ = json.NewEncoder(zw).Encode(v)
	_ = zw.Close()
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
