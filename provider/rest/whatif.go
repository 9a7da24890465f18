package rest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/whatif"
)

// WhatIfLine is one line of POST /api/v1/whatif?progress=true: a progress
// report while the runs go, then the report (or the error) last.
type WhatIfLine struct {
	Progress *WhatIfProgress `json:"progress,omitempty"`
	Report   *whatif.Report  `json:"report,omitempty"`
	Error    *ErrorBody      `json:"error,omitempty"`
}

// WhatIfProgress is how far one run has got, in simulated time.
type WhatIfProgress struct {
	Run     string  `json:"run"`
	Covered string  `json:"covered"`
	Total   string  `json:"total"`
	Percent float64 `json:"percent"`
}

// DefaultMaxWhatIfs is how many what-ifs run at once by default: one
// already keeps the cores busy (its runs go side by side, one a CPU).
const DefaultMaxWhatIfs = 1

// whatIfRetryAfter is the wait a what-if refused for another one running
// is told to take: runs take seconds to minutes.
const whatIfRetryAfter = 30 * time.Second

// whatIf answers POST /api/v1/whatif: the recorded period replayed under
// the pool files of the body (docs/whatif.md). The log is only read; the
// runs write to temporary logs of their own. With progress=true the answer
// is one JSON object a line, progress first, the report last. At most
// Options.MaxWhatIfs run at once, server-wide: one more is answered 429,
// so that no token holder, the read-only one included, keeps the cores
// busy with runs side by side.
func (s *server) whatIf(w http.ResponseWriter, r *http.Request) {
	// The slot is given back once the runs end, before the report is
	// written: a client that asks again on reading it is not refused.
	var release func()
	select {
	case s.whatIfs <- struct{}{}:
		var once sync.Once
		release = func() { once.Do(func() { <-s.whatIfs }) }
		defer release()
	default:
		s.log.Info("what-if refused: the server's limit of what-ifs at once is reached", "limit", cap(s.whatIfs))
		secs := seconds(whatIfRetryAfter)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, "ResourceExhausted",
			fmt.Sprintf("too many what-ifs at once: this server runs at most %d at a time (serve's --api-max-whatifs); try again in %d s", cap(s.whatIfs), secs))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, whatif.MaxRequestBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", "request body: "+err.Error())
		return
	}
	opts, err := whatif.ParseRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", err.Error())
		return
	}
	// A run is bounded by its own deadline (whatif.MaxRunTime), which
	// may outlast the write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	stream := r.URL.Query().Get("progress") == "true"
	var enc *json.Encoder
	var flush func()
	lastLog := -10.0
	opts.Progress = func(p whatif.Progress) {
		if pct := p.Percent(); pct-lastLog >= 10 || pct == 100 {
			lastLog = pct
			s.log.Info("what-if: replaying", "run", p.Run, "covered", p.Covered.String(), "of", p.Total.String(), "percent", fmt.Sprintf("%.0f", pct))
		}
		if enc != nil {
			_ = enc.Encode(WhatIfLine{Progress: &WhatIfProgress{Run: p.Run, Covered: p.Covered.String(), Total: p.Total.String(), Percent: p.Percent()}})
			flush()
		}
	}
	if stream {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		bw := bufio.NewWriter(w)
		enc = json.NewEncoder(bw)
		flush = func() {
			_ = bw.Flush()
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		defer flush()
	}
	began := time.Now()
	rep, err := whatif.Run(r.Context(), s.store, opts)
	release()
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		status, code := http.StatusInternalServerError, "Internal"
		switch {
		case eventlog.GapsOf(err) != nil:
			status, code = http.StatusPreconditionFailed, "FailedPrecondition"
		case errors.Is(err, whatif.ErrEmptyWindow), errors.Is(err, whatif.ErrNothingToReplay),
			errors.Is(err, whatif.ErrWindowTooLong), errors.Is(err, whatif.ErrRunTooLong):
			status, code = http.StatusBadRequest, "InvalidArgument"
		}
		s.log.Warn("what-if failed", "err", err)
		if enc != nil {
			_ = enc.Encode(WhatIfLine{Error: &ErrorBody{Error: err.Error(), Code: code}})
			return
		}
		writeError(w, status, code, err.Error())
		return
	}
	s.log.Info("what-if done", "from", opts.From, "to", opts.To, "candidates", len(opts.Candidates), "took", time.Since(began).Round(time.Millisecond).String())
	if enc != nil {
		_ = enc.Encode(WhatIfLine{Report: rep})
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// WhatIf runs a what-if, telling progress (when set) of each run as the
// server reports it.
func (c *Client) WhatIf(ctx context.Context, req whatif.Request, progress func(WhatIfProgress)) (*whatif.Report, error) {
	resp, err := c.Do(ctx, http.MethodPost, "/api/v1/whatif", url.Values{"progress": {"true"}}, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var line WhatIfLine
		if err := dec.Decode(&line); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("POST /api/v1/whatif: the answer ended before the report")
			}
			return nil, fmt.Errorf("POST /api/v1/whatif: bad answer: %w", err)
		}
		switch {
		case line.Error != nil:
			return nil, fmt.Errorf("%s (%s)", line.Error.Error, line.Error.Code)
		case line.Report != nil:
			return line.Report, nil
		case line.Progress != nil && progress != nil:
			progress(*line.Progress)
		}
	}
}
