package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/dashboard"
)

// TestLoginIsThrottledPerAddress: ten wrong tokens on the login form are
// refused; the eleventh gets the login page again with 429, Retry-After
// and the wait in words; the right token logs in even from the throttled
// address (a client behind the same NAT); another address logs in; a
// second later the address may try again. The API and the form share the
// address's budget.
func TestLoginIsThrottledPerAddress(t *testing.T) {
	h := handlerstest.New(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	counts := map[string]int{}
	lim := rest.NewAuthLimiter(rest.AuthLimitOptions{Clock: clk, OnFailure: func(surface, outcome string) {
		mu.Lock()
		counts[surface+"/"+outcome]++
		mu.Unlock()
	}})
	sessions := dashboard.NewSessions(clk, time.Hour)
	api := rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: token, Session: sessions.Access, AuthLimit: lim})
	d, err := dashboard.New(api, dashboard.Options{Token: token, Sessions: sessions, Clock: clk, Throttle: lim})
	if err != nil {
		t.Fatal(err)
	}
	login := func(remote, tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {tok}, "next": {"/ui/events"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		return rec
	}
	const guesser, other = "192.0.2.7:40001", "192.0.2.8:40002"
	for i := 1; i <= 9; i++ {
		if rec := login(guesser, "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i, rec.Code)
		}
	}
	// The tenth failure on the API: one budget for both.
	req := httptest.NewRequest("GET", "/api/v1/groups", nil)
	req.RemoteAddr = guesser
	req.Header.Set("Authorization", "Bearer guess")
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong bearer token: %d, want 401", rec.Code)
	}
	if rec := login(guesser, token); rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) == 0 {
		t.Errorf("login with the right token from the throttled address: %d, want 303 with a session cookie", rec.Code)
	}
	for _, tok := range []string{"guess", "guess again"} {
		rec := login(guesser, tok)
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("login with %q from the throttled address: %d, want 429", tok, rec.Code)
		}
		if got := rec.Header().Get("Retry-After"); got != "1" {
			t.Errorf("Retry-After %q, want 1", got)
		}
		if body := rec.Body.String(); !strings.Contains(body, "too many failed logins from this address; try again in 1 s") || !strings.Contains(body, `name="token"`) {
			t.Errorf("429 page lacks the message or the form:\n%s", body)
		}
		if len(rec.Result().Cookies()) != 0 {
			t.Error("a throttled login set a cookie")
		}
	}
	if rec := login(other, token); rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) == 0 {
		t.Errorf("login from another address: %d, want 303 with a session cookie", rec.Code)
	}
	clk.Step(time.Second)
	if rec := login(guesser, token); rec.Code != http.StatusSeeOther {
		t.Errorf("login a second later: %d, want 303", rec.Code)
	}
	mu.Lock()
	defer mu.Unlock()
	for key, want := range map[string]int{"dashboard/refused": 9, "api/refused": 1, "dashboard/throttled": 2, "api/throttled": 0} {
		if counts[key] != want {
			t.Errorf("%s counted %d, want %d", key, counts[key], want)
		}
	}
}
