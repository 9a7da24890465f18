package serve

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
)

// httpStatus GETs url (with a bearer token if one is given) and returns the
// status code and body.
func httpStatus(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// pprofServe starts serve on the example pool with a provider, the REST API
// and metrics, and --pprof as given; it returns the API and metrics
// addresses and the API token serve generated.
func pprofServe(t *testing.T, pprof bool) (api, metrics, token string) {
	t.Helper()
	api, metrics = freeAddr(t), freeAddr(t)
	o := serveOptions{config: examplePool, configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		grpcAddress: freeAddr(t), plaintext: true, apiAddress: api, metricsAddress: metrics, pprof: pprof}
	_, stop := startServe(t, o)
	t.Cleanup(stop)
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		b, err := os.ReadFile(filepath.Join(o.dataDir, apiTokenFile))
		token = strings.TrimSpace(string(b))
		return err
	})
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		_, err := http.Get("http://" + metrics + "/metrics")
		return err
	})
	return api, metrics, token
}

// Without --pprof (the default) the metrics address has no profiles.
func TestServePprofOffByDefault(t *testing.T) {
	_, metrics, _ := pprofServe(t, false)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, _ := httpStatus(t, "http://"+metrics+path, ""); code != http.StatusNotFound {
			t.Errorf("GET metrics %s without --pprof: %d, want 404", path, code)
		}
	}
	if code, _ := httpStatus(t, "http://"+metrics+"/metrics", ""); code != http.StatusOK {
		t.Errorf("GET /metrics: %d", code)
	}
}

// With --pprof the metrics address serves the profiles' index and a heap
// profile; the REST API, even with its token, serves none.
func TestServePprofOnTheMetricsAddressOnly(t *testing.T) {
	api, metrics, token := pprofServe(t, true)
	code, body := httpStatus(t, "http://"+metrics+"/debug/pprof/", "")
	if code != http.StatusOK || !strings.Contains(body, "heap") || !strings.Contains(body, "goroutine") {
		t.Fatalf("GET metrics /debug/pprof/ with --pprof: %d, want 200 and the profiles' index; body starts %.200q", code, body)
	}
	code, body = httpStatus(t, "http://"+metrics+"/debug/pprof/heap?debug=1", "")
	if code != http.StatusOK || !strings.Contains(body, "heap profile:") {
		t.Errorf("GET metrics /debug/pprof/heap?debug=1: %d, body starts %.100q", code, body)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap"} {
		if code, _ := httpStatus(t, "http://"+api+path, token); code != http.StatusNotFound {
			t.Errorf("GET REST API %s with the token: %d, want 404 (profiles on the metrics address only)", path, code)
		}
	}
}

// --pprof with no metrics address is refused before anything starts: the
// data dir stays empty.
func TestServePprofNeedsMetricsAddress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	err := runServe(t.Context(), serveOptions{config: examplePool, dataDir: dir, stream: "CLAIMSTREAM", logLevel: "warn", plaintext: true, pprof: true})
	if !errors.Is(err, errPprofWithoutMetrics) || !strings.Contains(err.Error(), "--metrics-address") {
		t.Fatalf("serve --pprof --metrics-address=: %v, want %v", err, errPprofWithoutMetrics)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir after the refused start: %v, want none", err)
	}
}

// /debug/pprof/cmdline would print the process's arguments, --api-token's
// value among them: it is not served, and no profile page shows the token.
func TestServePprofNeverShowsTheCommandLine(t *testing.T) {
	const secret = "pprof-cmdline-s3cret-token-0123456789"
	args := os.Args
	os.Args = append(slices.Clone(args), "--api-token="+secret, "--nats-password", secret)
	t.Cleanup(func() { os.Args = args })
	_, metrics, _ := pprofServe(t, true)
	code, body := httpStatus(t, "http://"+metrics+"/debug/pprof/cmdline", "")
	if code != http.StatusNotFound || strings.Contains(body, secret) {
		t.Fatalf("GET /debug/pprof/cmdline: %d, body %.200q; want 404 without the token", code, body)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=2", "/debug/pprof/symbol"} {
		if _, body := httpStatus(t, "http://"+metrics+path, ""); strings.Contains(body, secret) {
			t.Errorf("GET %s shows the token", path)
		}
	}
}
