package rest_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/provider/rest"
)

// failureCounts counts OnFailure by "surface/outcome".
type failureCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *failureCounts) note(surface, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[surface+"/"+outcome]++
}

func (c *failureCounts) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

type throttledAPI struct {
	h      http.Handler
	clk    *clocktesting.FakeClock
	counts *failureCounts
}

func startThrottledAPI(t *testing.T) *throttledAPI {
	t.Helper()
	h := handlerstest.New(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	counts := &failureCounts{n: map[string]int{}}
	lim := rest.NewAuthLimiter(rest.AuthLimitOptions{Clock: clk, OnFailure: counts.note})
	api := rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: "right-token", AuthLimit: lim})
	return &throttledAPI{h: api, clk: clk, counts: counts}
}

// get asks GET /api/v1/groups from remote with token ("" for none).
func (a *throttledAPI) get(remote, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "/api/v1/groups", nil)
	req.RemoteAddr = remote
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec
}

// TestWrongTokensAreThrottledPerAddress: ten wrong tokens are refused 401;
// the eleventh is answered 429 with Retry-After; the right token from
// that address (another client behind the same NAT) is let through;
// another address is not affected; a second later the address may try
// again.
func TestWrongTokensAreThrottledPerAddress(t *testing.T) {
	a := startThrottledAPI(t)
	const guesser, other = "192.0.2.7:40001", "192.0.2.8:40002"
	for i := 1; i <= 10; i++ {
		token := "guess"
		if i%2 == 0 {
			token = "" // no token at all counts the same
		}
		if rec := a.get(guesser, token); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i, rec.Code)
		}
	}
	rec := a.get("192.0.2.7:50000", "guess") // another port, same host
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("11th wrong token: %d %s, want 429", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	var body rest.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != "ResourceExhausted" || body.Error == "" {
		t.Errorf("429 body %s (%v), want code ResourceExhausted with a message", rec.Body, err)
	}
	if rec := a.get(guesser, "right-token"); rec.Code != http.StatusOK {
		t.Errorf("right token from the throttled address: %d, want 200", rec.Code)
	}
	if rec := a.get(guesser, "guess"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("a wrong token after the right one: %d, want 429 still", rec.Code)
	}
	if rec := a.get(other, "right-token"); rec.Code != http.StatusOK {
		t.Errorf("right token from another address: %d, want 200", rec.Code)
	}
	if rec := a.get(other, "guess"); rec.Code != http.StatusUnauthorized {
		t.Errorf("wrong token from another address: %d, want 401", rec.Code)
	}

	a.clk.Step(time.Second)
	if rec := a.get(guesser, "right-token"); rec.Code != http.StatusOK {
		t.Errorf("right token a second later: %d, want 200", rec.Code)
	}
	if rec := a.get(guesser, "guess"); rec.Code != http.StatusUnauthorized {
		t.Errorf("wrong token a second later: %d, want 401", rec.Code)
	}
	if rec := a.get(guesser, "guess"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("a second wrong token a second later: %d, want 429", rec.Code)
	}
	if got := a.counts.get("api/refused"); got != 12 {
		t.Errorf("api refused counted %d, want 12", got)
	}
	if got := a.counts.get("api/throttled"); got != 3 {
		t.Errorf("api throttled counted %d, want 3", got)
	}
}

// TestSuccessesDoNotSpendTheBudget: any number of good requests leave an
// address its full burst of failures.
func TestSuccessesDoNotSpendTheBudget(t *testing.T) {
	a := startThrottledAPI(t)
	const client = "198.51.100.1:1234"
	for i := 0; i < 50; i++ {
		if rec := a.get(client, "right-token"); rec.Code != http.StatusOK {
			t.Fatalf("good request %d: %d", i, rec.Code)
		}
	}
	for i := 1; i <= 10; i++ {
		if rec := a.get(client, "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d after good ones: %d, want 401", i, rec.Code)
		}
	}
	if rec := a.get(client, "guess"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("11th wrong token: %d, want 429", rec.Code)
	}
	// Back to a full burst after ten seconds of quiet.
	a.clk.Step(10 * time.Second)
	for i := 1; i <= 10; i++ {
		if rec := a.get(client, "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d after the refill: %d, want 401", i, rec.Code)
		}
	}
}

// TestIPv6ClientsShareTheirSlash64: stepping through the addresses of one
// /64 does not buy a new budget.
func TestIPv6ClientsShareTheirSlash64(t *testing.T) {
	a := startThrottledAPI(t)
	for i := 1; i <= 10; i++ {
		remote := fmt.Sprintf("[2001:db8:1:2::%x]:443", i)
		if rec := a.get(remote, "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d from %s: %d", i, remote, rec.Code)
		}
	}
	if rec := a.get("[2001:db8:1:2:ffff::1]:443", "guess"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("11th from the same /64: %d, want 429", rec.Code)
	}
	if rec := a.get("[2001:db8:1:3::1]:443", "guess"); rec.Code != http.StatusUnauthorized {
		t.Errorf("another /64: %d, want 401", rec.Code)
	}
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:40001":           "192.0.2.7",
		"[::ffff:192.0.2.7]:1":      "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:80": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":         "fe80::/64",
		"192.0.2.7":                 "192.0.2.7",
		"@":                         "@",
		"":                          "",
	} {
		if got := rest.ClientKey(in); got != want {
			t.Errorf("ClientKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzClientKey: any RemoteAddr gives a key without panicking; an IP
// address gives its own (IPv4) or its /64's (IPv6), whatever the port.
func FuzzClientKey(f *testing.F) {
	for _, s := range []string{"192.0.2.7:40001", "[2001:db8::1]:80", "[fe80::1%eth0]:1", "[::ffff:10.0.0.1]:2", "", ":", "[", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, remote string) {
		key := rest.ClientKey(remote)
		host, _, err := net.SplitHostPort(remote)
		if err != nil {
			return
		}
		addr, err := netip.ParseAddr(host)
		if err != nil {
			return
		}
		addr = addr.Unmap()
		if addr.Is4() {
			if key != addr.String() {
				t.Fatalf("ClientKey(%q) = %q, want %s", remote, key, addr)
			}
			return
		}
		p, err := netip.ParsePrefix(key)
		if err != nil || p.Bits() != 64 || !p.Contains(addr.WithZone("")) {
			t.Fatalf("ClientKey(%q) = %q, want the /64 holding %s", remote, key, addr)
		}
		if other := rest.ClientKey(net.JoinHostPort(addr.WithZone("").String(), "1")); other != key {
			t.Fatalf("ClientKey(%q) = %q but the same host on another port %q", remote, key, other)
		}
	})
}

func TestForwardedClient(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, c := range []struct {
		remote string
		xff    []string
		want   string
	}{
		{"192.0.2.7:1", []string{"203.0.113.1"}, "192.0.2.7"},                   // not a proxy: its own client
		{"10.0.0.1:1", nil, "10.0.0.1"},                                         // a proxy with no header
		{"10.0.0.1:1", []string{"203.0.113.1"}, "203.0.113.1"},                  // one proxy
		{"10.0.0.1:1", []string{"198.51.100.9, 203.0.113.1"}, "203.0.113.1"},    // the client's own left part is not believed
		{"10.0.0.1:1", []string{"203.0.113.1, 10.2.3.4"}, "203.0.113.1"},        // two proxies
		{"10.0.0.1:1", []string{"203.0.113.1", "10.2.3.4"}, "203.0.113.1"},      // two headers
		{"10.0.0.1:1", []string{"198.51.100.9, garbage, 10.2.3.4"}, "10.2.3.4"}, // stops at a non-address
		{"10.0.0.1:1", []string{"203.0.113.1:5555"}, "203.0.113.1"},             // with a port
		{"[fd00::1]:1", []string{"2001:db8:1:2::5"}, "2001:db8:1:2::/64"},       // IPv6
		{"10.0.0.1:1", []string{"10.9.9.9"}, "10.9.9.9"},                        // only proxies: the farthest
	} {
		if got := rest.ForwardedClient(c.remote, c.xff, trusted); got != c.want {
			t.Errorf("ForwardedClient(%q, %q) = %q, want %q", c.remote, c.xff, got, c.want)
		}
	}
}

// TestClientsBehindATrustedProxyHaveTheirOwnBudgets: behind a trusted
// proxy each client named by X-Forwarded-For is throttled alone; without
// the option the header is ignored (a guesser cannot buy budgets by
// writing it).
func TestClientsBehindATrustedProxyHaveTheirOwnBudgets(t *testing.T) {
	h := handlerstest.New(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	get := func(api http.Handler, remote, xff string) int {
		req := httptest.NewRequest("GET", "/api/v1/groups", nil)
		req.RemoteAddr = remote
		req.Header.Set("X-Forwarded-For", xff)
		req.Header.Set("Authorization", "Bearer guess")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec.Code
	}
	behind := rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: "right-token", AuthLimit: rest.NewAuthLimiter(rest.AuthLimitOptions{
		Clock: clk, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}})})
	for i := 0; i < 10; i++ {
		get(behind, "10.0.0.1:3000", "203.0.113.1")
	}
	if got := get(behind, "10.0.0.1:3000", "203.0.113.1"); got != http.StatusTooManyRequests {
		t.Errorf("11th guess of a client behind the proxy: %d, want 429", got)
	}
	if got := get(behind, "10.0.0.1:3000", "203.0.113.2"); got != http.StatusUnauthorized {
		t.Errorf("another client behind the proxy: %d, want 401", got)
	}

	direct := rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: "right-token", AuthLimit: rest.NewAuthLimiter(rest.AuthLimitOptions{Clock: clk})})
	for i := 0; i < 10; i++ {
		get(direct, "192.0.2.7:3000", fmt.Sprintf("203.0.113.%d", i))
	}
	if got := get(direct, "192.0.2.7:3000", "203.0.113.99"); got != http.StatusTooManyRequests {
		t.Errorf("11th guess with a made-up X-Forwarded-For and no trusted proxy: %d, want 429", got)
	}
}

// FuzzForwardedClient: any header gives a key without panicking; a
// connection that is not from a trusted proxy is its own client.
func FuzzForwardedClient(f *testing.F) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	f.Add("10.0.0.1:1", "203.0.113.1, 10.2.3.4")
	f.Add("192.0.2.7:1", "203.0.113.1")
	f.Add("10.0.0.1:1", "[2001:db8::1]:80,,garbage")
	f.Fuzz(func(t *testing.T, remote, xff string) {
		got := rest.ForwardedClient(remote, []string{xff}, trusted)
		host, _, err := net.SplitHostPort(remote)
		if err != nil {
			return
		}
		if a, err := netip.ParseAddr(host); err == nil && !trusted[0].Contains(a.Unmap()) && got != rest.ClientKey(remote) {
			t.Fatalf("ForwardedClient(%q, %q) = %q from an untrusted connection, want %q", remote, xff, got, rest.ClientKey(remote))
		}
	})
}
