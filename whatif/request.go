package whatif

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/claimstream/claimstream/handlers/pool"
)

// MaxRequestBytes bounds a what-if request's body (the pool files in it).
const MaxRequestBytes = 8 << 20

// Request is the body of POST /api/v1/whatif.
type Request struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	Seed int64     `json:"seed"`
	// Candidates are pool files, each with its name and content (YAML).
	Candidates []RequestCandidate `json:"candidates"`
}

// RequestCandidate is one pool file of a request.
type RequestCandidate struct {
	Name string `json:"name"`
	Pool string `json:"pool"`
}

// ParseRequest reads and checks a what-if request: strict JSON (an unknown
// field is an error), a period that is not empty, 1 to MaxCandidates named
// pool files that each parse as a pool file. Every error says which part
// is wrong; nothing is run on a bad request.
func ParseRequest(body []byte) (Options, error) {
	if len(body) > MaxRequestBytes {
		return Options{}, fmt.Errorf("request body of %d bytes: at most %d", len(body), MaxRequestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return Options{}, fmt.Errorf("request body: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Options{}, errors.New("request body: more than one JSON value")
	}
	if req.From.IsZero() || req.To.IsZero() {
		return Options{}, errors.New("from and to are required (RFC 3339)")
	}
	if !req.To.After(req.From) {
		return Options{}, fmt.Errorf("%w (from %s, to %s)", ErrEmptyWindow, req.From.Format(time.RFC3339), req.To.Format(time.RFC3339))
	}
	if err := CheckWindow(req.From, req.To); err != nil {
		return Options{}, err
	}
	if len(req.Candidates) == 0 {
		return Options{}, errors.New("candidates: give at least one pool file")
	}
	if len(req.Candidates) > MaxCandidates {
		return Options{}, fmt.Errorf("candidates: %d pool files, at most %d", len(req.Candidates), MaxCandidates)
	}
	opts := Options{From: req.From.UTC(), To: req.To.UTC(), Seed: req.Seed}
	seen := map[string]bool{}
	for i, c := range req.Candidates {
		if c.Name == "" {
			return Options{}, fmt.Errorf("candidates[%d]: name is required", i)
		}
		if seen[c.Name] {
			return Options{}, fmt.Errorf("candidates[%d]: name %q given twice", i, c.Name)
		}
		seen[c.Name] = true
		cfg, err := pool.Parse(c.Name, []byte(c.Pool))
		if err != nil {
			return Options{}, fmt.Errorf("candidates[%d]: %w", i, err)
		}
		opts.Candidates = append(opts.Candidates, Candidate{Name: c.Name, Config: cfg})
	}
	return opts, nil
}
