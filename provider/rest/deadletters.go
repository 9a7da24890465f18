package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

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
	items, err := s.opts.DeadLetters.ListDeadLetters(r.Context(), r.URL.Query().Get("sink"))
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
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", "request body: want {\"ids\": [N, ...]} or {\"all\": true[, \"sink\": NAME]}: "+err.Error())
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
