package serve

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The read-only token comes from its flag, its variable or its file; an
// empty file and a token equal to the admin one stop serve, saying why.
func TestReadTokenSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "read-token")
	if err := os.WriteFile(file, []byte(" viewer-token-0123456789abcdef0123456 \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLAIMSTREAM_API_READ_TOKEN", "")
	const admin = "admin-0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		flags         readTokenFlags
		want, wantErr string
	}{
		{readTokenFlags{}, "", ""},
		{readTokenFlags{token: "flag-token-0123456789abcdef0123456789"}, "flag-token-0123456789abcdef0123456789", ""},
		{readTokenFlags{file: file}, "viewer-token-0123456789abcdef0123456", ""},
		{readTokenFlags{file: empty}, "", "is empty"},
		{readTokenFlags{file: filepath.Join(dir, "nope")}, "", "--api-read-token-file"},
		{readTokenFlags{token: admin}, "", "is the admin token"},
		{readTokenFlags{token: "short"}, "", "--api-read-token is 5 characters long"},
	} {
		got, err := c.flags.resolve(admin)
		if got != c.want || (c.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%+v: %q, %v; want %q, error %q", c.flags, got, err, c.want, c.wantErr)
		}
	}
	t.Setenv("CLAIMSTREAM_API_READ_TOKEN", "env-token-0123456789abcdef01234567890")
	if got, err := (&readTokenFlags{file: file}).resolve(admin); got != "env-token-0123456789abcdef01234567890" || err != nil {
		t.Errorf("the variable: %q, %v", got, err)
	}
}

// serve's API and dashboard take --api-read-token: it reads, its writes
// and backups are 403, the admin token still writes, and its dashboard
// login opens a session.
func TestServeReadTokenEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, _ := newLogger("error", "text")
	o := serveOptions{config: examplePool, configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true,
		apiAddress: "127.0.0.1:0", apiToken: "admin-token-0123456789abcdef012345678", apiReadToken: readTokenFlags{token: "viewer-token-0123456789abcdef0123456"}}
	p, err := startPlane(ctx, o, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.emb.Shutdown()
	go func() { _ = p.views.Run(ctx) }()
	cfg, err := loadPool(o.config)
	if err != nil {
		t.Fatal(err)
	}
	leadNow(t, ctx, p)
	if err := p.applyPool(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h, err := p.apiHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(h)
	defer api.Close()
	call := func(method, path, token string) int {
		t.Helper()
		req, _ := http.NewRequest(method, api.URL+path, strings.NewReader(`{"by":"viewer"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/api/v1/groups", "viewer-token-0123456789abcdef0123456", http.StatusOK},
		{"GET", "/api/v1/backup", "viewer-token-0123456789abcdef0123456", http.StatusForbidden},
		{"POST", "/api/v1/slots/node-1.lan/decommission", "viewer-token-0123456789abcdef0123456", http.StatusForbidden},
		{"POST", "/api/v1/slots/node-1.lan/decommission", "admin-token-0123456789abcdef012345678", http.StatusOK},
		{"GET", "/api/v1/groups", "nobody", http.StatusUnauthorized},
	} {
		if got := call(c.method, c.path, c.token); got != c.want {
			t.Errorf("%s %s with %s: %d, want %d", c.method, c.path, c.token, got, c.want)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(api.URL+"/ui/login", url.Values{"token": {"viewer-token-0123456789abcdef0123456"}, "next": {"/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Fatalf("dashboard login with the read-only token: %d", resp.StatusCode)
	}
}
