package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/provider/rest/dashboard"
)

// FuzzLoginForm posts arbitrary login bodies: never a 5xx; a session only
// for the right token; and wherever next= points, the login sends the
// browser to a dashboard page of this origin, never elsewhere.
func FuzzLoginForm(f *testing.F) {
	for _, s := range []string{
		url.Values{"token": {token}, "next": {"/ui/events"}}.Encode(),
		url.Values{"token": {token}, "next": {"//evil.example/ui/"}}.Encode(),
		url.Values{"token": {token}, "next": {"https://evil.example/"}}.Encode(),
		url.Values{"token": {token}, "next": {"/ui/\\evil"}}.Encode(),
		url.Values{"token": {"wrong"}}.Encode(),
		"token=%zz", "", "token=" + token + "&token=x",
	} {
		f.Add(s)
	}
	fx := start(f, false)
	h := fx.srv.Config.Handler
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "http://dash.test/ui/login", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%q: %d %s", body, rec.Code, rec.Body.String())
		}
		form, err := url.ParseQuery(body)
		right := err == nil && strings.TrimSpace(form.Get("token")) == token
		// Opened: a session cookie was set, and it is a live session.
		opened := false
		for _, c := range rec.Result().Cookies() {
			if c.Name == dashboard.CookieName && c.Value != "" {
				probe := httptest.NewRequest("GET", "http://dash.test/api/v1/groups", nil)
				probe.AddCookie(c)
				opened = fx.sessions.Authenticates(probe)
			}
		}
		if opened != right || (rec.Code == http.StatusSeeOther) != right {
			t.Fatalf("%q: status %d, session opened %v, right token %v", body, rec.Code, opened, right)
		}
		if loc := rec.Header().Get("Location"); right && (!strings.HasPrefix(loc, "/ui/") || strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\r\n")) {
			t.Fatalf("%q: login sends the browser to %q", body, loc)
		}
		for _, c := range rec.Result().Cookies() {
			if c.Name == dashboard.CookieName && c.Value == token {
				t.Fatalf("the token went into the cookie")
			}
		}
	})
}
