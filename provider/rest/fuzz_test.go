package rest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// FuzzHandler sends arbitrary methods, paths, queries and bodies to the
// real API handler over a real store holding the scripted history. It
// must never panic nor answer 5xx (but 503, which says so on purpose),
// and a refused request (4xx) must leave the log as it was.
func FuzzHandler(f *testing.F) {
	for _, r := range rest.Routes() {
		method, path, _ := strings.Cut(r, " ")
		f.Add(method, fill(path), "", "", true)
	}
	for _, s := range []struct {
		method, path, query, body string
	}{
		{"GET", "/api/v1/claims", "phase=bogus", ""},
		{"GET", "/api/v1/events", "type=ClaimCreated,Nope&last=3", ""},
		{"GET", "/api/v1/events/export", "since=2026-03-04T09:00:00Z&until=2026-03-04T10:00:00Z", ""},
		{"GET", "/api/v1/replay", "seq=999999", ""},
		{"GET", "/api/v1/replay", "at=2026-03-04T09:30:00Z", ""},
		{"POST", "/api/v1/slots/node-3.lan/claim", "", `{"by":"fuzz","reason":"x"}`},
		{"POST", "/api/v1/slots/node-1.lan/decommission", "", `{"by":1}`},
		{"DELETE", "/api/v1/claims/node-3.lan-52fd0d", "", `{"by":"fuzz"}`},
		{"PATCH", "/api/v1/groups", "", ""},
		{"GET", "/api/v1/audit/claims/x", "slot=node-1.lan", ""},
		{"GET", "/api/v1/cost", "month=2026-03&by=slot", ""},
		{"GET", "/api/v1/cost", "month=2026-03&forecast=true", ""},
		{"GET", "/schemas/events/ClaimFailed.v1.json", "", ""},
		{"GET", "/schemas/events/..%2f..%2fgo.mod", "", ""},
		{"GET", "/api/v1/cost", "since=99999999d&until=2026-03-04T10:00:00Z", ""},
		{"GET", "/api/v1/timeline", "since=2026-03-04T09:00:00Z&until=2026-03-04T11:00:00Z", ""},
		{"GET", "/api/v1/timeline", "since=2026-03-04T11:00:00Z&until=2026-03-04T09:00:00Z", ""},
		{"GET", "/api/v1/events/stream", "last=3&slot=node-1.lan", ""},
	} {
		f.Add(s.method, s.path, s.query, s.body, true)
	}
	fx := resttest.Scripted(f)
	h := fx.Server.Config.Handler
	f.Fuzz(func(t *testing.T, method, path, query, body string, auth bool) {
		target := "http://api.test/" + strings.TrimPrefix(path, "/")
		if query != "" {
			target += "?" + query
		}
		// Canceled (not timed out) after a moment: a followed event
		// stream ends, as when its client goes away.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := time.AfterFunc(100*time.Millisecond, cancel)
		defer stop.Stop()
		req, err := http.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
		if err != nil {
			t.Skip("not an HTTP request:", err)
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+resttest.Token)
		}
		before, err := fx.H.Store.LastSeq(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		if code >= 500 && code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s: %d %s", method, target, code, rec.Body.String())
		}
		if code >= 400 {
			if after, err := fx.H.Store.LastSeq(context.Background()); err != nil || after != before {
				t.Fatalf("%s %s: refused (%d) but the log went %d -> %d (%v)", method, target, code, before, after, err)
			}
		}
	})
}
