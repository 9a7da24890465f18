package dashboard_test

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections/timeline"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/dashboard"
)

const token = "dashboard-test-token"

// readToken is the read-only token of every fixture.
const readToken = "dashboard-read-token"

// fixture serves the REST API and the dashboard over a real embedded
// JetStream pool, as serve wires them.
type fixture struct {
	h        *handlerstest.Harness
	srv      *httptest.Server
	sessions *dashboard.Sessions
	clk      *clocktesting.FakeClock

	mu     sync.Mutex
	counts map[string]int // OnLogin results and "csrf" refusals
}

func (f *fixture) count(what string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[what]
}

func start(t testing.TB, tlsServer bool) *fixture {
	t.Helper()
	h := handlerstest.New(t)
	h.Declare("homelab", events.GroupSpec{MaxSize: 3}, "node-1.lan", "node-2.lan", "node-3.lan")
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	sessions := dashboard.NewSessions(clk, time.Hour)
	// The timeline index folded with the views, as serve keeps it.
	idx, err := timeline.NewIndex(context.Background(), h.Views, h.Store, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	api := rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: token, ReadToken: readToken, Session: sessions.Access, Timeline: idx})
	f := &fixture{h: h, sessions: sessions, clk: clk, counts: map[string]int{}}
	note := func(what string) {
		f.mu.Lock()
		f.counts[what]++
		f.mu.Unlock()
	}
	d, err := dashboard.New(api, dashboard.Options{Token: token, ReadToken: readToken, Sessions: sessions, Clock: clk, OnLogin: note, OnCSRFRefused: func() { note("csrf") }, Known: rest.Known(h.Views)})
	if err != nil {
		t.Fatal(err)
	}
	if tlsServer {
		f.srv = httptest.NewTLSServer(d)
	} else {
		f.srv = httptest.NewServer(d)
	}
	t.Cleanup(f.srv.Close)
	return f
}

// client does not follow redirects: the tests look at them.
func (f *fixture) client(t testing.TB) *http.Client {
	jar, _ := cookiejar.New(nil)
	c := *f.srv.Client() // a copy: each client its own cookie jar
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func do(t testing.TB, c *http.Client, method, url string, body io.Reader, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (f *fixture) login(t testing.TB, c *http.Client, tok string) *http.Response {
	t.Helper()
	resp, _ := do(t, c, "POST", f.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {tok}, "next": {"/ui/events"}}.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	return resp
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

func (f *fixture) csrf(t testing.TB, c *http.Client) string {
	t.Helper()
	resp, body := do(t, c, "GET", f.srv.URL+"/ui/", nil, nil)
	m := csrfMeta.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("pool page: %d, csrf meta %v", resp.StatusCode, m)
	}
	return m[1]
}

var pages = []string{"/ui/", "/ui/timeline", "/ui/events", "/ui/slots/node-1.lan", "/ui/claims/node-1.lan-abcdef"}

func TestPagesAndAPIRefuseWithoutASession(t *testing.T) {
	f := start(t, false)
	c := f.client(t)
	for _, p := range pages {
		resp, _ := do(t, c, "GET", f.srv.URL+p, nil, nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login?next=") {
			t.Errorf("%s without a session: %d to %q, want 303 to the login", p, resp.StatusCode, loc)
		}
	}
	for _, p := range []string{"/api/v1/groups", "/api/v1/timeline", "/api/v1/events/stream"} {
		if resp, _ := do(t, c, "GET", f.srv.URL+p, nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a session or token: %d", p, resp.StatusCode)
		}
	}
	// A forged cookie is no session.
	resp, _ := do(t, c, "GET", f.srv.URL+"/api/v1/groups", nil, map[string]string{"Cookie": dashboard.CookieName + "=" + token})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the token as a cookie: %d", resp.StatusCode)
	}
	// The bearer token still works for the API, the CLI's way.
	if resp, _ := do(t, c, "GET", f.srv.URL+"/api/v1/groups", nil, map[string]string{"Authorization": "Bearer " + token}); resp.StatusCode != http.StatusOK {
		t.Fatalf("bearer token: %d", resp.StatusCode)
	}
}

func TestLoginKeepsASessionCookieAndLogoutEndsIt(t *testing.T) {
	f := start(t, false)
	c := f.client(t)
	resp := f.login(t, c, "wrong")
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || f.sessions.Len() != 0 || f.count("wrong_token") != 1 {
		t.Fatalf("wrong token: %d, cookies %v, sessions %d, counted %v", resp.StatusCode, resp.Cookies(), f.sessions.Len(), f.counts)
	}
	resp = f.login(t, c, token)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/events" || f.count("ok") != 1 {
		t.Fatalf("login: %d to %q (counted %v), want 303 to the page asked for", resp.StatusCode, resp.Header.Get("Location"), f.counts)
	}
	ck := resp.Cookies()
	if len(ck) != 1 {
		t.Fatalf("cookies %v", ck)
	}
	sc := ck[0]
	if sc.Name != dashboard.CookieName || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Secure || sc.Path != "/" || sc.MaxAge != 3600 {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, an hour, not Secure over plain HTTP", sc)
	}
	if strings.Contains(sc.Value, token) || len(sc.Value) < 40 {
		t.Fatalf("cookie value %q: want a random session id, not the token", sc.Value)
	}
	// A second login is another random session.
	c2 := f.client(t)
	if other := f.login(t, c2, token).Cookies()[0].Value; other == sc.Value {
		t.Fatal("two logins got the same session id")
	}
	for _, p := range pages {
		resp, body := do(t, c, "GET", f.srv.URL+p, nil, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<main id="main"`) {
			t.Errorf("%s in a session: %d", p, resp.StatusCode)
		}
	}
	if resp, _ := do(t, c, "GET", f.srv.URL+"/api/v1/slots", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("API in a session: %d", resp.StatusCode)
	}
	csrf := f.csrf(t, c)
	// Logout without the form's CSRF token is refused and ends nothing.
	if resp, _ := do(t, c, "POST", f.srv.URL+"/ui/logout", strings.NewReader(""), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("logout without CSRF: %d", resp.StatusCode)
	}
	resp, _ = do(t, c, "POST", f.srv.URL+"/ui/logout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("logout: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if ck := resp.Cookies(); len(ck) != 1 || ck[0].Value != "" || ck[0].MaxAge >= 0 {
		t.Fatalf("logout cookies %+v: want the session cookie cleared", ck)
	}
	// The old cookie, replayed, opens nothing.
	replay := map[string]string{"Cookie": dashboard.CookieName + "=" + sc.Value}
	if resp, _ := do(t, f.client(t), "GET", f.srv.URL+"/api/v1/slots", nil, replay); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API after logout: %d", resp.StatusCode)
	}
	if resp, _ := do(t, f.client(t), "GET", f.srv.URL+"/ui/", nil, replay); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("page after logout: %d", resp.StatusCode)
	}
}

func TestSessionExpires(t *testing.T) {
	f := start(t, false)
	c := f.client(t)
	f.login(t, c, token)
	if resp, _ := do(t, c, "GET", f.srv.URL+"/api/v1/groups", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("fresh session: %d", resp.StatusCode)
	}
	f.clk.Step(time.Hour)
	if resp, _ := do(t, c, "GET", f.srv.URL+"/api/v1/groups", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("session past its hour: %d", resp.StatusCode)
	}
	if f.sessions.Len() != 0 {
		t.Fatalf("%d sessions kept after expiry", f.sessions.Len())
	}
}

// TestAWriteInASessionNeedsItsCSRFToken: the cookie alone cannot claim a
// slot (a cross-site form would carry it, were it not SameSite); with the
// page's CSRF token it can.
func TestAWriteInASessionNeedsItsCSRFToken(t *testing.T) {
	f := start(t, false)
	c := f.client(t)
	f.login(t, c, token)
	ctx := context.Background()
	before, _ := f.h.Store.LastSeq(ctx)
	resp, body := do(t, c, "POST", f.srv.URL+"/api/v1/slots/node-1.lan/claim", strings.NewReader(`{"by":"mallory"}`), nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, dashboard.CSRFHeader) {
		t.Fatalf("write without CSRF: %d %s", resp.StatusCode, body)
	}
	resp, _ = do(t, c, "POST", f.srv.URL+"/api/v1/slots/node-1.lan/claim", strings.NewReader(`{"by":"mallory"}`), map[string]string{dashboard.CSRFHeader: "guess"})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("write with a wrong CSRF token: %d", resp.StatusCode)
	}
	if after, _ := f.h.Store.LastSeq(ctx); after != before {
		t.Fatalf("refused writes wrote: %d -> %d", before, after)
	}
	if n := f.count("csrf"); n != 2 {
		t.Fatalf("%d CSRF refusals counted, want 2", n)
	}
	csrf := f.csrf(t, c)
	resp, body = do(t, c, "POST", f.srv.URL+"/api/v1/slots/node-1.lan/claim", strings.NewReader(`{"by":"dashboard","reason":"test"}`), map[string]string{dashboard.CSRFHeader: csrf})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("write with the CSRF token: %d %s", resp.StatusCode, body)
	}
}

func TestLoginOverTLSSetsASecureCookie(t *testing.T) {
	f := start(t, true)
	resp := f.login(t, f.client(t), token)
	if ck := resp.Cookies(); len(ck) != 1 || !ck[0].Secure {
		t.Fatalf("cookies over TLS %+v: want Secure", ck)
	}
	if resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatal("no HSTS over TLS")
	}
}

func TestCrossSiteLoginIsRefused(t *testing.T) {
	f := start(t, false)
	for _, h := range []map[string]string{{"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}} {
		h["Content-Type"] = "application/x-www-form-urlencoded"
		resp, _ := do(t, f.client(t), "POST", f.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()), h)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Fatalf("%v: %d %v", h, resp.StatusCode, resp.Cookies())
		}
	}
	if n := f.count("cross_site"); n != 2 {
		t.Fatalf("%d cross-site logins counted, want 2", n)
	}
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	f := start(t, false)
	c := f.client(t)
	f.login(t, c, token)
	for _, p := range append([]string{"/ui/login", "/ui/static/app.css", "/ui/static/pool.js"}, pages...) {
		resp, _ := do(t, c, "GET", f.srv.URL+p, nil, nil)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline script or eval", p, csp)
		}
		if strings.HasPrefix(p, "/ui/static/") && (resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-cache") {
			t.Errorf("%s: %d, Cache-Control %q", p, resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
	}
}

func TestStaticFilesListNoDirectory(t *testing.T) {
	f := start(t, false)
	for _, p := range []string{"/ui/static/", "/ui/static/../templates/layout.html", "/ui/static/nope.js"} {
		if resp, body := do(t, f.client(t), "GET", f.srv.URL+p, nil, nil); resp.StatusCode/100 == 2 {
			t.Errorf("%s: %d %.80q", p, resp.StatusCode, body)
		}
	}
}

// TestNoInlineScriptNorStyleInTheAssets: the CSP forbids them, so a page
// that had one would break; every script is a file of this origin, and no
// asset names another origin.
func TestNoInlineScriptNorStyleInTheAssets(t *testing.T) {
	scripts := regexp.MustCompile(`(?is)<script([^>]*)>(.*?)</script>`)
	inline := regexp.MustCompile(`(?i)\son[a-z]+\s*=|\sstyle\s*=|javascript:|<style`)
	remote := regexp.MustCompile(`(?i)(?:src|href)\s*=\s*"(?:https?:)?//|url\(\s*["']?(?:https?:)?//|\beval\(|new Function\(`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".html") || strings.HasSuffix(path, ".js") || strings.HasSuffix(path, ".css")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".html") {
			if m := inline.Find(b); m != nil {
				t.Errorf("%s: inline script or style: %q", path, m)
			}
			for _, m := range scripts.FindAllSubmatch(b, -1) {
				if !strings.Contains(string(m[1]), `src="/ui/static/`) || strings.TrimSpace(string(m[2])) != "" {
					t.Errorf("%s: a script that is not a file of the dashboard: %q", path, m[0])
				}
			}
		}
		if m := remote.Find(b); m != nil {
			t.Errorf("%s: names another origin or evaluates code: %q", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A session of the read-only token reads every page, its slot page offers
// no command, and the API refuses its writes (with the CSRF token right)
// with 403, writing nothing; the admin token's session has the buttons.
func TestReadOnlySessionShowsNoCommandsAndCannotWrite(t *testing.T) {
	f := start(t, false)
	c := f.client(t)
	if resp := f.login(t, c, readToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with the read-only token: %d", resp.StatusCode)
	}
	csrf := f.csrf(t, c)
	for _, p := range pages[:4] {
		if resp, _ := do(t, c, "GET", f.srv.URL+p, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s in a read-only session: %d", p, resp.StatusCode)
		}
	}
	_, body := do(t, c, "GET", f.srv.URL+"/ui/slots/node-1.lan", nil, nil)
	if strings.Contains(body, "do-claim") || !strings.Contains(body, "read-only") {
		t.Errorf("the read-only session's slot page offers commands:\n%s", body)
	}
	before := f.h.Views.Seq()
	for _, verb := range []string{"claim", "decommission", "recommission"} {
		resp, body := do(t, c, "POST", f.srv.URL+"/api/v1/slots/node-1.lan/"+verb, strings.NewReader(`{"by":"dashboard"}`), map[string]string{dashboard.CSRFHeader: csrf})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("%s in a read-only session: %d %s", verb, resp.StatusCode, body)
		}
	}
	if resp, _ := do(t, c, "GET", f.srv.URL+"/api/v1/slots/node-1.lan", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a read in a read-only session: %d", resp.StatusCode)
	}
	if after := f.h.Views.Seq(); after != before {
		t.Fatalf("the read-only session wrote: seq %d -> %d", before, after)
	}
	admin := f.client(t)
	f.login(t, admin, token)
	if _, body := do(t, admin, "GET", f.srv.URL+"/ui/slots/node-1.lan", nil, nil); !strings.Contains(body, "do-claim") {
		t.Errorf("the admin session's slot page lacks the commands")
	}
}

// writeControls are what a page that writes carries: the slot commands
// and any form but the header's logout.
var writeControls = regexp.MustCompile(`id="actions"|id="do-[a-z]+"|<form(?:[^>]*)action="(?:[^"/]|/[^u]|/u[^i]|/ui/[^l])`)

func TestUnknownSlotOrClaimPageIsNotFound(t *testing.T) {
	f := start(t, false)
	c := f.client(t)
	f.login(t, c, token)
	for _, p := range []string{"/ui/slots/node-9.lan", "/ui/claims/nope", "/ui/claims/node-9.lan-abcdef"} {
		resp, body := do(t, c, "GET", f.srv.URL+p, nil, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
		if !strings.Contains(body, "No such") || !strings.Contains(body, `id="missing"`) {
			t.Errorf("%s: the page does not say the object is unknown:\n%s", p, body)
		}
		if m := writeControls.FindString(body); m != "" || strings.Contains(body, "<button type=\"button\"") {
			t.Errorf("%s: the page offers a write (%q):\n%s", p, m, body)
		}
		if strings.Contains(body, "slot.js") || strings.Contains(body, "claim.js") {
			t.Errorf("%s: the page runs the object's script", p)
		}
	}
	// Known ones still answer, with the commands for an admin session.
	resp, body := do(t, c, "GET", f.srv.URL+"/ui/slots/node-1.lan", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="do-claim"`) {
		t.Errorf("a known slot: %d, commands %v", resp.StatusCode, strings.Contains(body, "do-claim"))
	}
	if resp, _ := do(t, c, "GET", f.srv.URL+"/ui/claims/node-1.lan-abcdef", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a claim name of a known slot: %d, want 200 (its story may be in the log)", resp.StatusCode)
	}
}
