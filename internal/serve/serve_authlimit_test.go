package serve

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
)

// TestServeThrottlesFailedAuthentications: serve answers the eleventh
// wrong token from an address 429 (the right one still passes), and the
// scrape counts the failures from 0.
func TestServeThrottlesFailedAuthentications(t *testing.T) {
	addr, apiAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM",
		noFsync: true, logLevel: "error", grpcAddress: addr, plaintext: true, metricsAddress: metricsAddr, apiAddress: apiAddr, apiToken: "limit-token-0123456789abcdef0123456"}
	_, stop := startServe(t, o)
	defer stop()

	status := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+apiAddr+"/api/v1/groups", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		_, err := http.Get("http://" + apiAddr + "/healthz")
		return err
	})
	body, _ := get(t, "http://"+metricsAddr+"/metrics", "")
	if want := `claimstream_auth_failures_total{outcome="throttled",surface="dashboard"} 0`; !strings.Contains(body, want+"\n") {
		t.Errorf("scrape at start lacks %q", want)
	}
	for i := 1; i <= 10; i++ {
		if got := status("guess"); got != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i, got)
		}
	}
	// The budget refills one a second of wall time: on a slow machine a
	// guess or two more may be let through before the 429.
	refused, throttled := 10, 0
	for throttled == 0 && refused < 40 {
		switch got := status("guess"); got {
		case http.StatusTooManyRequests:
			throttled++
		case http.StatusUnauthorized:
			refused++
		default:
			t.Fatalf("guess: %d", got)
		}
	}
	if throttled == 0 {
		t.Fatalf("%d wrong tokens and never throttled", refused)
	}
	// The right token passes the throttle: a client behind the same
	// address as the guesser is not locked out.
	if got := status(o.apiToken); got != http.StatusOK {
		t.Fatalf("the right token from the throttled address: %d, want 200", got)
	}
	body, _ = get(t, "http://"+metricsAddr+"/metrics", "")
	for _, want := range []string{
		fmt.Sprintf(`claimstream_auth_failures_total{outcome="refused",surface="api"} %d`, refused),
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(body, `claimstream_auth_failures_total{outcome="throttled",surface="api"} 0`+"\n") {
		t.Error("no throttled request counted")
	}
}

// TestServeRefusesABadTrustedProxy: a --api-trusted-proxies entry that is
// not an address stops serve before it touches its data dir.
func TestServeRefusesABadTrustedProxy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: dir, stream: "CLAIMSTREAM",
		noFsync: true, logLevel: "error", apiAddress: freeAddr(t), apiToken: "limit-token-0123456789abcdef0123456",
		authLimit: authLimitFlags{trustedProxies: []string{"10.0.0.0/8", "proxy.lan"}}}
	err := runServe(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), `--api-trusted-proxies: "proxy.lan" is neither an IP address nor a CIDR`) {
		t.Fatalf("serve with a bad trusted proxy: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data dir was touched: %v", err)
	}
	good := authLimitFlags{trustedProxies: []string{"10.1.2.3", "192.168.0.0/16", "fd00::/8"}}
	got, err := good.trusted()
	if err != nil || fmt.Sprint(got) != "[10.1.2.3/32 192.168.0.0/16 fd00::/8]" {
		t.Errorf("trusted() = %v, %v", got, err)
	}
}
