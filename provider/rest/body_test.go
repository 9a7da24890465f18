package rest_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sinks"
	"github.com/claimstream/claimstream/provider/rest"
)

// bodyAPI is the API (no auth) over a pool of two slots, with a sink (to
// a closed port) so the dead-letter routes decode their bodies too.
type bodyAPI struct {
	h     *handlerstest.Harness
	api   http.Handler
	sinks *sinks.Dispatcher
}

func startBodyAPI(t testing.TB) *bodyAPI {
	t.Helper()
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{}, "a", "b")
	cfg, err := sinks.ParseConfig([]byte("sinks:\n  - {name: alerts, url: http://127.0.0.1:1/hook, maxAttempts: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	d := &sinks.Dispatcher{JS: h.Store.JetStream(), Store: h.Store, Config: cfg, Clock: h.Clock, Logger: quiet}
	api := rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{NoAuth: true, Logger: quiet, DeadLetters: d, Sinks: []string{"alerts"}})
	return &bodyAPI{h: h, api: api, sinks: d}
}

// bodyRoutes are the routes that decode a JSON body.
var bodyRoutes = []struct{ method, path string }{
	{"POST", "/api/v1/slots/a/claim"},
	{"POST", "/api/v1/slots/b/decommission"},
	{"POST", "/api/v1/slots/b/recommission"},
	{"DELETE", "/api/v1/claims/a-000000"},
	{"POST", "/api/v1/sinks/dead-letters/redeliver"},
	{"POST", "/api/v1/whatif"},
}

func (a *bodyAPI) send(t testing.TB, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, method, "http://api.test"+path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	a.api.ServeHTTP(rec, req)
	return rec
}

// state is what a refused body must leave as it was: the log's end and
// the dead letters.
func (a *bodyAPI) state(t testing.TB) (uint64, int) {
	t.Helper()
	last, err := a.h.Store.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dl, err := a.sinks.ListDeadLetters(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return last, len(dl)
}

// TestBodiesWithTrailingDataAreRefused: a JSON body followed by a second
// value or by anything but white space is a 400 naming it, and changes
// nothing; the same body alone is acted on.
func TestBodiesWithTrailingDataAreRefused(t *testing.T) {
	a := startBodyAPI(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/slots/a/claim", `{"by":"x"}{"by":"y"}`},
		{"POST", "/api/v1/slots/a/claim", `{"by":"x"} x`},
		{"POST", "/api/v1/slots/b/decommission", `{"reason":"r"}[]`},
		{"DELETE", "/api/v1/claims/a-000000", `{} {}`},
		{"POST", "/api/v1/sinks/dead-letters/redeliver", `{"all":true}{"all":true}`},
		{"POST", "/api/v1/sinks/dead-letters/redeliver", `{"ids":[1]} 2`},
		{"POST", "/api/v1/whatif", `{"from":"2026-03-04T09:00:00Z","to":"2026-03-04T10:00:00Z","candidates":[]} {}`},
	} {
		before, dlBefore := a.state(t)
		rec := a.send(t, c.method, c.path, c.body)
		after, dlAfter := a.state(t)
		want := "trailing data"
		if strings.HasSuffix(c.path, "whatif") {
			want = "more than one JSON value"
		}
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) || after != before || dlAfter != dlBefore {
			t.Errorf("%s %s %s: %d %s (log %d -> %d)", c.method, c.path, c.body, rec.Code, rec.Body.String(), before, after)
		}
	}
	before, _ := a.state(t)
	if rec := a.send(t, "POST", "/api/v1/slots/a/claim", `{"by":"x"}`+"\n"); rec.Code != http.StatusCreated {
		t.Fatalf("one body: %d %s", rec.Code, rec.Body.String())
	}
	if after, _ := a.state(t); after == before {
		t.Fatal("the claim wrote nothing")
	}
}

// FuzzCommandBodies sends arbitrary bytes as the body of every route that
// decodes one: the answer is 2xx or 4xx, never 5xx nor a panic, and a 4xx
// changes neither the log nor the dead letters.
func FuzzCommandBodies(f *testing.F) {
	for i := range bodyRoutes {
		for _, b := range []string{``, `{}`, `{"by":"fuzz","reason":"x"}`, `{"by":1}`, `{"ids":[1,1]}`, `{"all":true,"sink":"*"}`, `{"all":true,"sink":"nope"}`,
			`{"by":"x"}{"by":"y"}`, `{"by":"x"} x`, `null`, `[]`, `{"ids":[18446744073709551615]}`,
			`{"from":"2000-01-01T00:00:00Z","to":"9999-01-01T00:00:00Z","candidates":[{"name":"a","pool":"groups: []"}]}`} {
			f.Add(uint8(i), b)
		}
	}
	a := startBodyAPI(f)
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		before, dlBefore := a.state(t)
		rec := a.send(t, r.method, r.path, body)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", r.method, r.path, body, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 {
			if after, dlAfter := a.state(t); after != before || dlAfter != dlBefore {
				t.Fatalf("%s %s %q: refused (%d) but the log went %d -> %d, the dead letters %d -> %d", r.method, r.path, body, rec.Code, before, after, dlBefore, dlAfter)
			}
		}
	})
}
