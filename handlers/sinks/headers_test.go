package sinks_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sinks"
)

// Header values are sent exactly as written, with no expansion of the
// environment; a secret comes only from the variable or the file a header
// names with valueFrom (a relative file from the sinks file's directory).
func TestSinkHeadersAreSentAsWrittenOrFromTheirNamedSource(t *testing.T) {
	t.Setenv("def", "EXPANDED")
	t.Setenv("TOKEN", "EXPANDED")
	t.Setenv("H2_ALERTS_TOKEN", "env-s3cret")
	h := handlerstest.New(t)
	var mu sync.Mutex
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hook-token"), []byte("file-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sinks.yaml")
	if err := os.WriteFile(path, []byte(`
sinks:
  - name: h
    url: `+srv.URL+`
    types: [ClaimCreated]
    start: all
    headers:
      X-Plain: abc$def
      X-Spelled: {value: "Bearer ${TOKEN} $TOKEN"}
      Authorization: {prefix: "Bearer ", valueFrom: {env: H2_ALERTS_TOKEN}}
      X-From-File: {valueFrom: {file: hook-token}}
      X-Count: 5
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := sinks.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	start(t, h, cfg, clock.RealClock{}, nil)
	h.Declare("g", events.GroupSpec{}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"})
	eventstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if got == nil {
			return errors.New("nothing received yet")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for name, want := range map[string]string{
		"X-Plain": "abc$def", "X-Spelled": "Bearer ${TOKEN} $TOKEN", "Authorization": "Bearer env-s3cret",
		"X-From-File": "file-s3cret", "X-Count": "5",
	} {
		if v := got.Values(name); len(v) != 1 || v[0] != want {
			t.Errorf("header %s: %q, want %q", name, v, want)
		}
	}
}

// A header that cannot be sent as meant is refused at load with its line
// and field, and the value is never shown: a control character (CR, LF,
// NUL) in a value as written or as read, a name that is not a token, a
// header the request or the CloudEvents binding sets, a plain value that
// relied on $VAR expansion, a valueFrom that reads nothing.
func TestSinkHeaderProblemsAreRefusedAtLoad(t *testing.T) {
	env := map[string]string{"CRLF_TOKEN": "crlf-s3cret\r\nX-Injected: 1", "EMPTY": ""}
	files := map[string]string{"/run/lf": "lf-s3cret\nmore\n", "/run/empty": "\n"}
	for _, c := range []struct{ headers, want string }{
		{`{X-A: "cr-s3cret\rx"}`, "sinks file:5: sinks[0].headers.X-A: the value holds a CR, LF, NUL or another control character: a header value is one line"},
		{`{X-A: "lf-s3cret\nX-Injected: 1"}`, "sinks file:5: sinks[0].headers.X-A: the value holds a CR, LF"},
		{`{X-A: "nul-s3cret\0"}`, "sinks file:5: sinks[0].headers.X-A: the value holds a CR, LF, NUL"},
		{`{X-A: {valueFrom: {env: CRLF_TOKEN}}}`, "sinks file:5: sinks[0].headers.X-A: the value (read from environment variable CRLF_TOKEN) holds a CR, LF"},
		{`{X-A: {valueFrom: {file: /run/lf}}}`, "sinks file:5: sinks[0].headers.X-A: the value (read from file /run/lf) holds a CR, LF"},
		{`{"X A": b}`, `sinks file:5: sinks[0].headers.X A: "X A" is not a header name`},
		{`{"X:A": b}`, `sinks[0].headers.X:A: "X:A" is not a header name`},
		{`{"": b}`, `sinks[0].headers.: "" is not a header name`},
		{`{Ce-Id: x}`, "sinks file:5: sinks[0].headers.Ce-Id: reserved: the CloudEvents binding sets the Ce-* headers from the event"},
		{`{ce-type: x}`, "sinks[0].headers.ce-type: reserved: the CloudEvents binding sets the Ce-* headers"},
		{`{CE-SOURCE: x}`, "sinks[0].headers.CE-SOURCE: reserved"},
		{`{Content-Type: text/plain}`, "sinks[0].headers.Content-Type: reserved: the CloudEvents binding sets it"},
		{`{content-length: "0"}`, "sinks[0].headers.content-length: reserved"},
		{`{Host: evil.example}`, "sinks[0].headers.Host: reserved: the URL's host is sent"},
		{`{Transfer-Encoding: chunked}`, "sinks[0].headers.Transfer-Encoding: reserved"},
		{`{Connection: close}`, "sinks[0].headers.Connection: reserved"},
		{`{traceparent: x}`, "sinks[0].headers.traceparent: reserved: the event's own trace context is sent"},
		{`{Tracestate: x}`, "sinks[0].headers.Tracestate: reserved"},
		{`{Authorization: "Bearer ${CLAIMSTREAM_API_TOKEN}"}`, "sinks file:5: sinks[0].headers.Authorization: refers to ${CLAIMSTREAM_API_TOKEN}, but values are sent as written: for the variable's value write {valueFrom: {env: NAME}}"},
		{`{Authorization: "Bearer $TOKEN"}`, "sinks[0].headers.Authorization: refers to $TOKEN, but values are sent as written"},
		{`{X-A: {valueFrom: {env: NOT_SET_H2}}}`, "sinks file:5: sinks[0].headers.X-A.valueFrom.env: environment variable NOT_SET_H2 is not set"},
		{`{X-A: {valueFrom: {env: EMPTY}}}`, "sinks[0].headers.X-A.valueFrom.env: environment variable EMPTY is empty"},
		{`{X-A: {valueFrom: {env: "A B"}}}`, `sinks[0].headers.X-A.valueFrom.env: "A B" is not a variable name`},
		{`{X-A: {valueFrom: {file: /run/none}}}`, "sinks[0].headers.X-A.valueFrom.file: /run/none: file does not exist"},
		{`{X-A: {valueFrom: {file: /run/empty}}}`, "sinks[0].headers.X-A.valueFrom.file: file /run/empty is empty"},
		{`{X-A: {valueFrom: {vault: x}}}`, "sinks[0].headers.X-A.valueFrom: want {env: NAME} or {file: PATH}"},
		{`{X-A: {valueFrom: {env: EMPTY, file: /run/lf}}}`, "sinks[0].headers.X-A.valueFrom: want {env: NAME} or {file: PATH}"},
		{`{X-A: {value: a, valueFrom: {env: EMPTY}}}`, "sinks[0].headers.X-A.valueFrom.env: environment variable EMPTY is empty"},
		{`{X-A: {value: a, valueFrom: {file: /run/empty}, prefix: p}}`, "sinks[0].headers.X-A.valueFrom.file"},
		{`{X-A: {prefix: p, value: a}}`, "sinks[0].headers.X-A: prefix goes with valueFrom"},
		{`{X-A: {}}`, "sinks[0].headers.X-A: want exactly one of value and valueFrom"},
		{`{X-A: {valu: a}}`, "sinks[0].headers.X-A.valu: unknown field"},
		{`{X-A: [a]}`, "sinks[0].headers.X-A: want a string or a map with value or valueFrom, got a list"},
		{`{X-A: a, x-a: b}`, "sinks[0].headers.x-a: given twice (header names are case-insensitive: X-A)"},
		{`[a]`, "sinks[0].headers: want a map of header names to values"},
	} {
		// The headers' map is on line 5.
		file := "sinks:\n  - name: a\n    url: http://x\n    headers:\n      " + c.headers + "\n"
		_, err := sinks.ParseConfigWith([]byte(file), env, files)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("headers %s:\n%v\nwant it to say\n%s", c.headers, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("headers %s: the error shows the value: %v", c.headers, err)
		}
	}
}

// A Config built in code is held to the same rules when it runs: the
// dispatcher refuses it before any consumer is made.
func TestDispatcherRefusesBadHeadersOfAConfigBuiltInCode(t *testing.T) {
	h := handlerstest.New(t)
	for _, hs := range []map[string]string{{"Ce-Id": "x"}, {"Host": "x"}, {"X-A": "s3cret\r\nX-B: 1"}, {"X A": "b"}} {
		cfg := sinks.Config{Sinks: []sinks.Sink{{Name: "code", URL: "http://127.0.0.1:1/", Headers: hs}}}
		d := &sinks.Dispatcher{JS: h.Store.JetStream(), Store: h.Store, Config: cfg, Logger: quiet}
		// Bounded: a dispatcher that accepted the config would deliver
		// until its context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := d.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "sink code: headers.") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("headers %q: %v, want a refusal naming the header, not its value", hs, err)
		}
	}
	if _, err := h.Store.JetStream().Consumer(context.Background(), h.Store.Stream(), "sink-code"); err == nil {
		t.Error("a refused config made its consumer")
	}
}
