package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// readOnlyPosts are the routes that take a body but change nothing: the
// read-only token may call them.
var readOnlyPosts = []string{"POST /api/v1/whatif"}

// The read-only token, over every route of the table: each admin route
// answers it 403 with a clear message and the log does not move; every
// other route answers it as it answers the admin token (never 401 or 403).
// A route that is not a GET is an admin route unless it is known to change
// nothing, so a new write route cannot slip past the read-only token.
func TestReadOnlyTokenCannotWriteAnything(t *testing.T) {
	f := resttest.Scripted(t)
	admin := rest.AdminRoutes()
	ctx := context.Background()
	before, err := f.H.Store.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]any{
		"POST /api/v1/sinks/dead-letters/redeliver": map[string]any{"all": true},
		"POST /api/v1/whatif":                       map[string]any{},
	}
	for _, route := range rest.Routes() {
		method, path, _ := strings.Cut(route, " ")
		if !strings.HasPrefix(path, "/api/") {
			continue
		}
		isAdmin := slices.Contains(admin, route)
		if method != http.MethodGet && !isAdmin && !slices.Contains(readOnlyPosts, route) {
			t.Errorf("%s writes but is not an admin route", route)
		}
		p := strings.ReplaceAll(path, "{name}", "node-3.lan")
		if strings.HasPrefix(path, "/api/v1/groups/") {
			p = strings.ReplaceAll(path, "{name}", "homelab")
		}
		if strings.HasPrefix(path, "/api/v1/claims/") || strings.HasPrefix(path, "/api/v1/audit/claims/") {
			p = strings.ReplaceAll(path, "{name}", f.Claims["second"])
		}
		var body any
		if method != http.MethodGet {
			body = map[string]any{"by": "mallory", "reason": "read-only test"}
			if b, ok := bodies[route]; ok {
				body = b
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp := send(t, rctx, method, f.Server.URL+p, resttest.ReadToken, body)
		var msg []byte
		if !strings.HasSuffix(path, "/stream") {
			msg, _ = io.ReadAll(resp.Body)
		}
		resp.Body.Close()
		cancel()
		switch {
		case isAdmin && (resp.StatusCode != http.StatusForbidden || !strings.Contains(string(msg), "read-only") || !strings.Contains(string(msg), "--api-token")):
			t.Errorf("%s with the read-only token: %d %s, want 403 saying the token is read-only", route, resp.StatusCode, msg)
		case !isAdmin && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
			t.Errorf("%s with the read-only token: %d %s, want it served", route, resp.StatusCode, msg)
		}
	}
	if after, err := f.H.Store.LastSeq(ctx); err != nil || after != before {
		t.Fatalf("the read-only token wrote: log end %d -> %d (%v)", before, after, err)
	}
	// The backup is an admin route: it holds the whole log, for a restore.
	if !slices.Contains(admin, "GET /api/v1/backup") {
		t.Error("the backup is open to the read-only token")
	}
	// The admin token still writes.
	resp := send(t, ctx, "POST", f.Server.URL+"/api/v1/slots/node-3.lan/decommission", resttest.Token, map[string]any{"by": "alice", "reason": "x"})
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("decommission with the admin token: %d", resp.StatusCode)
	}
}

// A wrong token is refused 401 whatever tokens the server has.
func TestWrongTokenIsUnauthenticated(t *testing.T) {
	f := resttest.Start(t)
	for _, tok := range []string{"", "x", resttest.ReadToken + "x", resttest.Token[:len(resttest.Token)-1]} {
		resp := send(t, context.Background(), "GET", f.Server.URL+"/api/v1/groups", tok, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: %d, want 401", tok, resp.StatusCode)
		}
	}
}

// send makes one request with the bearer token tok and a JSON body.
func send(t *testing.T, ctx context.Context, method, u, tok string, body any) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return resp
}

// FuzzReadOnlyTokenNeverWrites: whatever request the read-only token
// sends (any method, path, query and body), the log does not move.
func FuzzReadOnlyTokenNeverWrites(f *testing.F) {
	for _, r := range rest.Routes() {
		method, path, _ := strings.Cut(r, " ")
		f.Add(method, fill(path), "", `{"by":"mallory","reason":"x","all":true}`)
	}
	f.Add("POST", "/api/v1/slots/node-3.lan/claim/", "", `{"by":"x"}`)
	f.Add("POST", "/api//v1/slots/node-3.lan/claim", "", `{"by":"x"}`)
	f.Add("POST", "/api/v1/slots/node-3.lan%2fclaim", "", `{"by":"x"}`)
	f.Add("DELETE", "/api/v1/claims/node-3.lan-52fd0d", "x=1", `{}`)
	fx := resttest.Scripted(f)
	h := fx.Server.Config.Handler
	f.Fuzz(func(t *testing.T, method, path, query, body string) {
		target := "http://api.test/" + strings.TrimPrefix(path, "/")
		if query != "" {
			target += "?" + query
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := time.AfterFunc(100*time.Millisecond, cancel)
		defer stop.Stop()
		req, err := http.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
		if err != nil {
			t.Skip("not an HTTP request:", err)
		}
		req.Header.Set("Authorization", "Bearer "+resttest.ReadToken)
		before, err := fx.H.Store.LastSeq(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if after, err := fx.H.Store.LastSeq(context.Background()); err != nil || after != before {
			t.Fatalf("%s %s with the read-only token: %d, and the log went %d -> %d (%v)", method, target, rec.Code, before, after, err)
		}
	})
}
