package rest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Client talks to the API. The CLI is built on it.
type Client struct {
	// BaseURL is the server ("http://127.0.0.1:8087").
	BaseURL string
	Token   string
	HTTP    *http.Client
	// AuthHint, when set, is added to a 401 answer's error: where the
	// caller looked for the token and how to pass one.
	AuthHint string

	mu        sync.Mutex
	serverNow time.Time
}

// Now is the server's clock as of its last answer; the zero time before
// any answer (or from a server that does not say).
func (c *Client) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serverNow
}

func (c *Client) noteNow(h http.Header) {
	t, err := time.Parse(time.RFC3339Nano, h.Get(NowHeader))
	if err != nil {
		return
	}
	c.mu.Lock()
	c.serverNow = t
	c.mu.Unlock()
}

// APIError is an error answer of the API.
type APIError struct {
	Status int
	Code   string
	Msg    string
	// Hint follows the message (Client.AuthHint on a 401).
	Hint string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Code, e.Msg)
	if e.Code == "" {
		msg = fmt.Sprintf("%s (HTTP %d)", e.Msg, e.Status)
	}
	if e.Hint != "" {
		msg += "\n" + e.Hint
	}
	return msg
}

// UnreachableError is a server that could not be reached at all.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach claimstream at %s: is `claimstream serve` running? (%s)", e.URL, why(e.Err))
}

func (e *UnreachableError) Unwrap() error { return e.Err }

func why(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "no such host " + dns.Name
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Do sends one request and returns the response of a 2xx answer; any other
// answer is an *APIError, a failed connection an *UnreachableError.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", c.BaseURL, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &UnreachableError{URL: c.BaseURL, Err: err}
	}
	c.noteNow(resp.Header)
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(b))
			if eb.Error == "" {
				eb.Error = resp.Status
			}
		}
		ae := &APIError{Status: resp.StatusCode, Code: eb.Code, Msg: eb.Error}
		if resp.StatusCode == http.StatusUnauthorized {
			ae.Hint = c.AuthHint
		}
		return nil, ae
	}
	return resp, nil
}

// Get decodes the JSON answer of a GET into out.
func (c *Client) Get(ctx context.Context, path string, query url.Values, out any) error {
	return c.call(ctx, http.MethodGet, path, query, nil, out)
}

func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.Do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: bad answer: %w", method, path, err)
	}
	return nil
}

func esc(s string) string { return url.PathEscape(s) }

// Groups lists the groups.
func (c *Client) Groups(ctx context.Context) (List[Group], error) {
	var out List[Group]
	return out, c.Get(ctx, "/api/v1/groups", nil, &out)
}

// Group gets one group.
func (c *Client) Group(ctx context.Context, name string) (Group, error) {
	var out Group
	return out, c.Get(ctx, "/api/v1/groups/"+esc(name), nil, &out)
}

// Slots lists the slots (of group, if set).
func (c *Client) Slots(ctx context.Context, group string) (List[Slot], error) {
	var out List[Slot]
	return out, c.Get(ctx, "/api/v1/slots", values("group", group), &out)
}

// Slot gets one slot.
func (c *Client) Slot(ctx context.Context, name string) (Slot, error) {
	var out Slot
	return out, c.Get(ctx, "/api/v1/slots/"+esc(name), nil, &out)
}

// Claims lists the claims in the views, filtered by group, slot and phase.
func (c *Client) Claims(ctx context.Context, group, slot, phase string) (List[Claim], error) {
	var out List[Claim]
	return out, c.Get(ctx, "/api/v1/claims", values("group", group, "slot", slot, "phase", phase), &out)
}

// Claim gets one claim of the views.
func (c *Client) Claim(ctx context.Context, name string) (Claim, error) {
	var out Claim
	return out, c.Get(ctx, "/api/v1/claims/"+esc(name), nil, &out)
}

// AuditSlot tells a slot's whole story from the log.
func (c *Client) AuditSlot(ctx context.Context, slot string) (Audit, error) {
	var out Audit
	return out, c.Get(ctx, "/api/v1/audit/slots/"+esc(slot), nil, &out)
}

// AuditClaim tells one claim's story; slot names its slot when the claim
// was collected and the server cannot find it.
func (c *Client) AuditClaim(ctx context.Context, claim, slot string) (Audit, error) {
	var out Audit
	return out, c.Get(ctx, "/api/v1/audit/claims/"+esc(claim), values("slot", slot), &out)
}

// ReplayAt rebuilds the views as they were at t.
func (c *Client) ReplayAt(ctx context.Context, t time.Time) (Replay, error) {
	var out Replay
	return out, c.Get(ctx, "/api/v1/replay", values("at", t.UTC().Format(time.RFC3339Nano)), &out)
}

// ReplaySeq rebuilds the views as they were after event seq.
func (c *Client) ReplaySeq(ctx context.Context, seq uint64) (Replay, error) {
	var out Replay
	return out, c.Get(ctx, "/api/v1/replay", values("seq", seqString(seq)), &out)
}

// ManualClaim claims a slot by hand.
func (c *Client) ManualClaim(ctx context.Context, slot string, req CommandRequest) (CommandResult, error) {
	var out CommandResult
	return out, c.call(ctx, http.MethodPost, "/api/v1/slots/"+esc(slot)+"/claim", nil, req, &out)
}

// DeleteClaim ends a claim by hand.
func (c *Client) DeleteClaim(ctx context.Context, claim string, req CommandRequest) (CommandResult, error) {
	var out CommandResult
	return out, c.call(ctx, http.MethodDelete, "/api/v1/claims/"+esc(claim), nil, req, &out)
}

// Decommission takes a slot out of service.
func (c *Client) Decommission(ctx context.Context, slot string, req CommandRequest) (CommandResult, error) {
	var out CommandResult
	return out, c.call(ctx, http.MethodPost, "/api/v1/slots/"+esc(slot)+"/decommission", nil, req, &out)
}

// Recommission puts a slot back into service.
func (c *Client) Recommission(ctx context.Context, slot string, req CommandRequest) (CommandResult, error) {
	var out CommandResult
	return out, c.call(ctx, http.MethodPost, "/api/v1/slots/"+esc(slot)+"/recommission", nil, req, &out)
}

// EventQuery filters the log.
type EventQuery struct {
	Slot, Claim, Group string
	Types              []string
	Since, Until       time.Time
	From               uint64
	Last               int
	Follow             bool
	// OnOpen, when set, is called once the server has accepted the
	// request, before the first event (not sent).
	OnOpen func() `json:"-"`
}

func (q EventQuery) values() url.Values {
	v := values("slot", q.Slot, "claim", q.Claim, "group", q.Group, "type", strings.Join(q.Types, ","))
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.From > 0 {
		v.Set("from", seqString(q.From))
	}
	if q.Last > 0 {
		v.Set("last", fmt.Sprint(q.Last))
	}
	if q.Follow {
		v.Set("follow", "true")
	}
	return v
}

// Events calls fn for every event of the log the query matches, as the
// server sends them (with Follow, until ctx ends).
func (c *Client) Events(ctx context.Context, q EventQuery, fn func(Event) error) error {
	return c.lines(ctx, "/api/v1/events", q, func(b []byte) error {
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("bad event line: %w", err)
		}
		return fn(e)
	})
}

// Export copies the matching events as CloudEvents JSON Lines to w.
func (c *Client) Export(ctx context.Context, q EventQuery, w io.Writer) error {
	return c.lines(ctx, "/api/v1/events/export", q, func(b []byte) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

func (c *Client) lines(ctx context.Context, path string, q EventQuery, fn func([]byte) error) error {
	resp, err := c.Do(ctx, http.MethodGet, path, q.values(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if q.OnOpen != nil {
		q.OnOpen()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if bytes.HasPrefix(sc.Bytes(), []byte(`{"error":`)) {
			// The server's read failed midway: its last line says why.
			var e ErrorBody
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Error != "" {
				return &APIError{Status: resp.StatusCode, Code: e.Code, Msg: e.Error + " (the answer is cut there)"}
			}
		}
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func values(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	return v
}
