package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/claimstream/claimstream/handlers/decide"
)

// firstPageBytes is how much of a streamed answer is held back before its
// status goes out: a read of the log that fails within it is answered
// with an error status and a JSON error body, not a 200 cut short.
const firstPageBytes = 256 << 10

// pagedWriter holds a streamed answer's first page; past it (or at
// commit) the 200 and the page go out and the rest is written through.
type pagedWriter struct {
	w         http.ResponseWriter
	buf       []byte
	committed bool
}

func (p *pagedWriter) Write(b []byte) (int, error) {
	if p.committed {
		return p.w.Write(b)
	}
	p.buf = append(p.buf, b...)
	if len(p.buf) >= firstPageBytes {
		if err := p.commit(); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// commit sends the status and the held page.
func (p *pagedWriter) commit() error {
	if p.committed {
		return nil
	}
	p.committed = true
	p.w.WriteHeader(http.StatusOK)
	_, err := p.w.Write(p.buf)
	p.buf = nil
	return err
}

// readFailedStatus is the status of a failed read of the log: the
// refusal's own when it has a code, else 503 (the store did not answer).
func readFailedStatus(err error) (int, string) {
	if code := decide.CodeOf(err); code != 0 {
		return StatusOf(code), code.String()
	}
	return http.StatusServiceUnavailable, "Unavailable"
}

// readFailed answers a read of the log that failed before anything was
// sent: an error status with a JSON body (nothing when the client went
// away).
func (s *server) readFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	s.log.Warn("log read failed", "what", what, "path", r.URL.Path, "err", err)
	status, code := readFailedStatus(err)
	writeError(w, status, code, "cannot read the log: "+err.Error())
}

// abortStream ends a streamed answer whose read failed after its status
// went out: tail, when set, is written first (an error line or event the
// client can read), then the connection is cut, so the body has no
// proper end (no closing chunk) and no client takes it for whole.
func (s *server) abortStream(w http.ResponseWriter, r *http.Request, what string, err error, tail func(ErrorBody) []byte) {
	if r.Context().Err() != nil {
		return
	}
	s.log.Warn("log read failed midway: answer cut", "what", what, "path", r.URL.Path, "err", err)
	if tail != nil {
		_, code := readFailedStatus(err)
		_, _ = w.Write(tail(ErrorBody{Error: "cannot read the log: " + err.Error(), Code: code}))
		_ = http.NewResponseController(w).Flush()
	}
	panic(http.ErrAbortHandler)
}

// ndjsonError is a failed read as the last line of a JSON Lines answer.
func ndjsonError(e ErrorBody) []byte {
	b, _ := json.Marshal(e)
	return append(b, '\n')
}

// sseError is a failed read as the last server-sent event of a stream.
func sseError(e ErrorBody) []byte {
	b, _ := json.Marshal(e)
	out := append([]byte("event: log-error\ndata: "), b...)
	return append(out, "\n\n"...)
}
