package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

func do(t *testing.T, f *resttest.Fixture, method, path, auth string) (*http.Response, rest.ErrorBody) {
	t.Helper()
	req, err := http.NewRequest(method, f.Server.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body rest.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp, body
}

// TestBearerSchemeIsCaseInsensitive: RFC 9110 auth schemes are
// case-insensitive; the token itself is not.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	f := resttest.Start(t)
	for _, auth := range []string{"Bearer " + resttest.Token, "bearer " + resttest.Token, "BEARER " + resttest.Token, "bEaReR  " + resttest.Token + " "} {
		if resp, body := do(t, f, "GET", "/api/v1/groups", auth); resp.StatusCode != http.StatusOK {
			t.Errorf("%q: %d %+v, want 200", auth, resp.StatusCode, body)
		}
	}
	for _, auth := range []string{"Basic " + resttest.Token, "Bearer" + resttest.Token, "Bearer", "bearer " + strings.ToUpper(resttest.Token), resttest.Token} {
		if resp, _ := do(t, f, "GET", "/api/v1/groups", auth); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%q: %d, want 401", auth, resp.StatusCode)
		}
	}
}

// TestBadQueryIs400: a query parameter a route does not take, or a value
// outside its allowed set, is refused with the allowed ones named, and
// changes nothing.
func TestBadQueryIs400(t *testing.T) {
	f := resttest.Scripted(t)
	before, _ := f.H.Store.LastSeq(context.Background())
	auth := "Bearer " + resttest.Token
	for _, c := range []struct{ path, want string }{
		{"/api/v1/claims?phase=bogus", `phase: "bogus" is not one of pending, booting, ready, failed, completed`},
		{"/api/v1/claims?phse=ready", `unknown query parameter "phse"; GET /api/v1/claims takes group, slot, phase`},
		{"/api/v1/claims?phase=ready&phase=failed", "phase: given 2 times; give it once"},
		{"/api/v1/groups?all=yes", `all: "yes" is not one of true, false`},
		{"/api/v1/slots?all=1", `all: "1" is not one of true, false`},
		{"/api/v1/events?follow=please", `follow: "please" is not one of true, false`},
		{"/api/v1/slots/node-1.lan?x=1", `unknown query parameter "x"; GET /api/v1/slots/node-1.lan takes none`},
		{"/api/v1/claims?phase=%zz", "query: invalid URL escape"},
		{"/api/v1/slots/node-1.lan/claim?by=me", `unknown query parameter "by"`},
	} {
		method := "GET"
		if strings.Contains(c.path, "/claim?") {
			method = "POST"
		}
		resp, body := do(t, f, method, c.path, auth)
		if resp.StatusCode != http.StatusBadRequest || body.Code != "InvalidArgument" || !strings.Contains(body.Error, c.want) {
			t.Errorf("%s %s: %d %+v, want 400 with %q", method, c.path, resp.StatusCode, body, c.want)
		}
	}
	for _, path := range []string{"/api/v1/claims?phase=ready", "/api/v1/claims?phase=", "/api/v1/groups?all=true", "/api/v1/events?follow=false&last=2"} {
		if resp, body := do(t, f, "GET", path, auth); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %+v, want 200", path, resp.StatusCode, body)
		}
	}
	if after, _ := f.H.Store.LastSeq(context.Background()); after != before {
		t.Fatalf("refused requests wrote: log went %d -> %d", before, after)
	}
}

// TestWrongMethodIs405: a path the API serves, asked with a method it
// does not serve, is 405 with Allow, not 404.
func TestWrongMethodIs405(t *testing.T) {
	f := resttest.Scripted(t)
	auth := "Bearer " + resttest.Token
	for _, c := range []struct{ method, path, allow string }{
		{"POST", "/api/v1/groups", "GET, HEAD"},
		{"DELETE", "/api/v1/slots/node-1.lan", "GET, HEAD"},
		{"GET", "/api/v1/slots/node-1.lan/claim", "POST"},
		{"PUT", "/api/v1/claims/x", "GET, HEAD, DELETE"},
		{"POST", "/healthz", "GET, HEAD"},
	} {
		resp, body := do(t, f, c.method, c.path, auth)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow || body.Code != "MethodNotAllowed" {
			t.Errorf("%s %s: %d Allow=%q %+v, want 405 Allow=%q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body, c.allow)
		}
	}
	// Unauthenticated, an /api path answers 401 whatever the method.
	if resp, _ := do(t, f, "POST", "/api/v1/groups", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /api/v1/groups without a token: %d, want 401", resp.StatusCode)
	}
	// A path the API does not serve stays 404.
	if resp, _ := do(t, f, "GET", "/api/v1/nothing", auth); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /api/v1/nothing: %d, want 404", resp.StatusCode)
	}
}
