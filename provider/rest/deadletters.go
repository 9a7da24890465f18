package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/claimstream/claimstream/handlers/sinks"
)

// DeadLetters is what the API needs of the webhook sinks: the dead-letter
// records, and their redelivery. serve gives the sinks' Dispatcher.
type DeadLetters interface {
	ListDeadLetters(ctx context.Context, sink string) ([]sinks.DeadLetterEntry, error)
	Redeliver(ctx context.Context, req sinks.RedeliverRequest) ([]sinks.RedeliverResult, error)
}

// DeadLetterList is the answer of GET /api/v1/sinks/dead-letters.
type DeadLetterList struct {
	Items []sinks.DeadLetterEntry `json:"items"`
}

// RedeliverAnswer is the answer of POST /api/v1/sinks/dead-letters/redeliver.
type RedeliverAnswer struct {
	Results []sinks.RedeliverResult `json:"results"`
}

func (s *server) noSinks(w http.ResponseWriter) bool {
	if s.opts.DeadLetters == nil {
		writeError(w, http.StatusNotFound, "NotFound", "serve runs with no --sinks file: there are no sinks and no dead letters")
		return true
	}
	return false
}

func (s *server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	if s.noSinks(w) {
		return
	}
	sink := r.URL.Query().Get("sink")
	if s.badSink(w, "sink", sink) {
		return
	}
	items, err := s.opts.DeadLetters.ListDeadLetters(r.Context(), sink)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "Unavailable", "cannot read the dead letters: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, DeadLetterList{Items: items})
}

// redeliverDeadLetters is a state-changing call: POST, with the bearer
// token like every /api route.
func (s *server) redeliverDeadLetters(w http.ResponseWriter, r *http.Request) {
	if s.noSinks(w) {
		return
	}
	var req sinks.RedeliverRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", "request body: want {\"ids\": [N, ...]} or {\"all\": true[, \"sink\": NAME]}: "+err.Error())
		return
	}
	// A dead letter named twice would be sent twice (and its second
	// removal reported as a failure): refused, so the ask is unambiguous.
	seen := make(map[uint64]bool, len(req.IDs))
	for _, id := range req.IDs {
		if seen[id] {
			writeError(w, http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("ids: dead letter %d is named twice: name each once", id))
			return
		}
		seen[id] = true
	}
	if s.badSink(w, "sink", req.Sink) {
		return
	}
	res, err := s.opts.DeadLetters.Redeliver(r.Context(), req)
	switch {
	case errors.Is(err, sinks.ErrBadRedeliver):
		writeError(w, http.StatusBadRequest, "InvalidArgument", err.Error())
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "Unavailable", "redeliver: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, RedeliverAnswer{Results: res})
}

// sinkName is a sink's name as the sinks file allows it (one NATS subject
// token, no wildcard).
var sinkName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// badSink answers a sink name that names no sink: 400 for what is not a
// sink name at all (a NATS wildcard such as * or > would match every
// sink's letters), 404 for a name the sinks file does not hold. It
// reports whether it answered.
func (s *server) badSink(w http.ResponseWriter, field, name string) bool {
	if name == "" {
		return false
	}
	if !sinkName.MatchString(name) {
		writeError(w, http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("%s: %q is not a sink name (letters, digits, _ and -; no wildcards)", field, name))
		return true
	}
	if s.opts.Sinks != nil && !slices.Contains(s.opts.Sinks, name) {
		writeError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s: no sink %q in the sinks file (its sinks: %s)", field, name, strings.Join(s.opts.Sinks, ", ")))
		return true
	}
	return false
}

// ListDeadLetters lists the dead letters (of sink, if set).
func (c *Client) ListDeadLetters(ctx context.Context, sink string) (DeadLetterList, error) {
	var out DeadLetterList
	return out, c.Get(ctx, "/api/v1/sinks/dead-letters", values("sink", sink), &out)
}

// Redeliver sends dead letters again.
func (c *Client) Redeliver(ctx context.Context, req sinks.RedeliverRequest) (RedeliverAnswer, error) {
	var out RedeliverAnswer
	return out, c.call(ctx, http.MethodPost, "/api/v1/sinks/dead-letters/redeliver", nil, req, &out)
}
