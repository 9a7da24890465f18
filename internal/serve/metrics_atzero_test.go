package serve

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/internal/buildinfo"
)

// Right after serve starts with a pool, before any claim: every counter and
// histogram of each group and each known reason is on the scrape at 0, the
// slots are counted by state, and the build is reported.
func TestServeMetricsExistAtZeroFromStart(t *testing.T) {
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	// A sink nobody listens at: it is never reached before the scrape
	// (the sinks run with the reactors, and nothing is claimed).
	sinksFile := filepath.Join(t.TempDir(), "sinks.yaml")
	writeFile(t, sinksFile, "sinks:\n  - name: alerts\n    url: http://127.0.0.1:9/hook\n    types: [ClaimFailed]\n")
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn", grpcAddress: addr, plaintext: true, metricsAddress: metricsAddr, sinks: sinksFile}
	_, stop := startServe(t, o)
	defer stop()

	body, ctype := get(t, "http://"+metricsAddr+"/metrics", "")
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Errorf("Content-Type %q without an Accept header, want the Prometheus text format", ctype)
	}
	bi := buildinfo.Get()
	want := []string{
		`claimstream_build_info{go_version="` + bi.GoVersion + `",revision="` + bi.Revision + `",version="` + bi.Version + `"} 1`,
		`claimstream_slots{group="homelab",state="off"} 3`,
		`claimstream_slots{group="homelab",state="resting"} 0`,
		`claimstream_slots{group="homelab",state="ready"} 0`,
		`claimstream_claims{group="homelab",phase="pending"} 0`,
		`claimstream_append_duration_seconds_count{outcome="conflict"} 0`,
		`claimstream_reactor_work_duration_seconds_count{outcome="error",work="slot"} 0`,
		`claimstream_backups_total{result="error"} 0`,
		`claimstream_tls_certificate_reload_failures_total{server="provider"} 0`,
		`claimstream_sink_delivery_failures_total{sink="alerts"} 0`,
		`claimstream_sink_dead_letters_total{sink="alerts"} 0`,
		`claimstream_log_write_failures_total{reason="no_space"} 0`,
		`claimstream_log_append_resends_total 0`,
		`claimstream_kube_write_failures_total{what="event"} 0`,
		`claimstream_power_readings_total{driver="ipmi",outcome="failed"} 0`,
		`claimstream_power_readings_total{driver="wol",outcome="on"} 0`,
	}
	for _, g := range []string{"homelab", "burst"} {
		requester := "cluster-autoscaler"
		if g == "burst" {
			requester = "builtin-scaler"
		}
		want = append(want,
			`claimstream_claim_failures_total{group="`+g+`",reason="DeadlineExceeded"} 0`,
			`claimstream_claim_failures_total{group="`+g+`",reason="HostLost"} 0`,
			`claimstream_deadline_misses_total{group="`+g+`"} 0`,
			`claimstream_shutdown_attempts_total{force="true",group="`+g+`"} 0`,
			`claimstream_shutdown_attempt_limits_total{group="`+g+`"} 0`,
			`claimstream_host_joins_refused_total{group="`+g+`"} 0`,
			`claimstream_claims_created_total{group="`+g+`",requester="`+requester+`"} 0`,
			`claimstream_claim_time_to_ready_seconds_count{group="`+g+`"} 0`,
			`claimstream_claim_time_to_ready_seconds_bucket{group="`+g+`",le="1800"} 0`,
			`claimstream_claim_attempts_bucket{group="`+g+`",le="+Inf"} 0`,
		)
	}
	for _, line := range want {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if strings.Contains(body, `phase="failed"`) || strings.Contains(body, `phase="completed"`) {
		t.Error("claimstream_claims reports terminal phases: a failed or completed claim is no longer a claim")
	}
	if t.Failed() {
		t.Log(body)
	}

	// OpenMetrics when the scraper asks for it.
	om, ctype := get(t, "http://"+metricsAddr+"/metrics", "application/openmetrics-text;version=1.0.0")
	if !strings.HasPrefix(ctype, "application/openmetrics-text") || !strings.HasSuffix(om, "# EOF\n") {
		t.Errorf("Accept openmetrics: Content-Type %q, ends %q", ctype, om[max(0, len(om)-20):])
	}
	if !strings.Contains(om, `claimstream_claim_failures_total{group="homelab",reason="DeadlineExceeded"} 0`) {
		t.Error("the OpenMetrics scrape lacks the zero failures")
	}
}

func get(t *testing.T, url, accept string) (string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
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
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b), resp.Header.Get("Content-Type")
}
