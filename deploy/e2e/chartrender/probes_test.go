package chartrender

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The probes ask the server, on the listener that serves /readyz and
// /healthz (the REST API's: --api-address), whether it is ready (views
// caught up, log writable) and alive; the start-up probe leaves a long
// replay of the log alone.
func TestProbesMeanReady(t *testing.T) {
	for _, c := range []struct {
		doc, scheme string
	}{{"", "HTTP"}, {"rest: {tls: true}", "HTTPS"}, {"{replicas: 3, rest: {port: 9443}}", "HTTP"}} {
		objs := mustRender(t, c.doc)
		srv := server(t, objs)
		a := args(t, objs)
		addr := a["--api-address"]
		_, apiPort, _ := strings.Cut(addr, ":")
		if !containerPort(srv, "http", mustAtoi(t, apiPort)) {
			t.Fatalf("%s: the container's http port is not --api-address %s", c.doc, addr)
		}
		for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
			p, ok := srv[probe].(map[string]any)
			if !ok {
				t.Fatalf("%s: no %s", c.doc, probe)
			}
			if got := str(t, p, "httpGet", "path"); got != path {
				t.Errorf("%s: %s path %s, want %s", c.doc, probe, got, path)
			}
			if got := str(t, p, "httpGet", "port"); got != "http" {
				t.Errorf("%s: %s port %s, want http", c.doc, probe, got)
			}
			if got := str(t, p, "httpGet", "scheme"); got != c.scheme {
				t.Errorf("%s: %s scheme %s, want %s", c.doc, probe, got, c.scheme)
			}
		}
		if c.scheme == "HTTPS" && (a["--api-tls-cert"] == "" || a["--api-tls-key"] == "") {
			t.Errorf("%s: HTTPS probes without --api-tls-cert/--api-tls-key: %v", c.doc, a)
		}
		if c.scheme == "HTTP" {
			if _, ok := a["--api-tls-cert"]; ok {
				t.Errorf("%s: HTTP probes but the API serves TLS", c.doc)
			}
		}
		startup, ok := srv["startupProbe"].(map[string]any)
		if !ok {
			t.Fatalf("%s: no startupProbe", c.doc)
		}
		budget := time.Duration(mustInt(t, startup["periodSeconds"])*mustInt(t, startup["failureThreshold"])) * time.Second
		if budget < 10*time.Minute {
			t.Errorf("%s: start-up budget %s is short for replaying a large log", c.doc, budget)
		}
	}
}

// Without the REST API nothing serves /readyz: the probes check that the
// provider listens (it does once the pool file is applied).
func TestProbesWithoutTheAPI(t *testing.T) {
	srv := server(t, mustRender(t, "rest: {enabled: false}"))
	for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
		p, ok := srv[probe].(map[string]any)
		if !ok {
			t.Errorf("no %s", probe)
			continue
		}
		if got := str(t, p, "tcpSocket", "port"); got != "grpc" {
			t.Errorf("%s: tcpSocket port %s, want grpc", probe, got)
		}
	}
}

// The API's certificate (the provider's) names the API Service, so that
// the CLI can verify it through the Service or a port-forward.
func TestAPICertificateNamesTheService(t *testing.T) {
	objs := mustRender(t, "rest: {tls: true}")
	cert := parseCert(t, str(t, mustFind(t, objs, "Secret", "claimstream-server-tls").Object, "data", "tls.crt"))
	for _, name := range []string{"claimstream-http", "claimstream-http.ns.svc", "localhost"} {
		if err := cert.VerifyHostname(name); err != nil {
			t.Errorf("server certificate: %v", err)
		}
	}
}

func mustInt(t *testing.T, v any) int64 {
	t.Helper()
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	t.Fatalf("%v (%T) is not a number", v, v)
	return 0
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
