package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/handlers/decide"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

var examplePool = filepath.Join("..", "..", "deploy", "examples", "pool.yaml")

// A second serve on a data dir that a running `claimstream serve` owns
// fails at once, naming the owner's pid; once the owner exits a new one
// starts.
func TestSecondServeOnOneDataDirIsRefused(t *testing.T) {
	if args := os.Getenv("CLAIMSTREAM_TEST_ARGS"); args != "" {
		// Started by this test: be `claimstream` with those arguments.
		os.Args = append([]string{"claimstream"}, strings.Fields(args)...)
		runMain()
		os.Exit(0)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondServeOnOneDataDirIsRefused$")
	cmd.Env = append(os.Environ(),
		"CLAIMSTREAM_TEST_ARGS=serve --config "+examplePool+" --data-dir "+dir+" --grpc-address= --api-address= --metrics-address= --no-fsync --log-level warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	owner := strconv.Itoa(cmd.Process.Pid)
	eventstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		b, err := os.ReadFile(filepath.Join(dir, natsserver.DataDirLockFile))
		if err != nil || strings.TrimSpace(string(b)) != owner {
			return fmt.Errorf("the serve process has not locked %s yet (%q, %v)", dir, b, err)
		}
		return nil
	})

	start := time.Now()
	o := serveOptions{config: examplePool, configPoll: time.Hour, dataDir: dir, stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn"}
	err := runServe(context.Background(), o)
	if !errors.Is(err, natsserver.ErrDataDirInUse) || !strings.Contains(err.Error(), "pid "+owner) {
		t.Fatalf("second serve: got %v, want the data dir in use by pid %s", err, owner)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the refusal took %v", took)
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	exited <- nil // for the cleanup
	log, _ := newLogger("warn", "text")
	p, err := startPlane(context.Background(), o, log, nil, nil)
	if err != nil {
		t.Fatalf("after the owner exited: %v", err)
	}
	p.emb.Shutdown()
}

// A data dir that cannot be written stops serve at once, saying so.
func TestServeOnAReadOnlyDataDir(t *testing.T) {
	dir := eventstest.MountTmpfs(t, "size=1m")
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_RDONLY, "size=1m"); err != nil {
		t.Skipf("skipped: cannot remount %s read-only here: %v", dir, err)
	}
	start := time.Now()
	err := runServe(context.Background(), serveOptions{config: examplePool, dataDir: dir, logLevel: "warn", plaintext: true, grpcAddress: "", apiAddress: "", metricsAddress: ""})
	if err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("got %v, want an error saying %s is read-only", err, dir)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the refusal took %v, want at once", took)
	}
}

func getBody(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// The disk of the data dir fills up under a running serve: /readyz and the
// gRPC health service say so with the reason, IncreaseSize is answered
// Unavailable at once, the metrics show it; once space is freed serve takes
// writes again without a restart, and nothing acknowledged is lost.
func TestServeSurvivesAFullDisk(t *testing.T) {
	dir := eventstest.MountTmpfs(t, "size=8m")
	addr, apiAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	o := serveOptions{config: examplePool, configPoll: time.Hour, dataDir: dir, stream: "CLAIMSTREAM", logLevel: "warn", grpcAddress: addr, plaintext: true, apiAddress: apiAddr, metricsAddress: metricsAddr}
	start := func() (pb.CloudProviderClient, healthpb.HealthClient, func()) {
		conn, stop := startServe(t, o)
		return pb.NewCloudProviderClient(conn), healthpb.NewHealthClient(conn), stop
	}
	c, hc, stop := start()
	ctx := context.Background()
	if _, err := c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "homelab", Delta: 1}); err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(dir, "filler")
	eventstest.FillDisk(t, filler)
	var body string
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		code, b, err := getBody("http://" + apiAddr + "/readyz")
		body = b
		if err != nil || code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz %d %s %v", code, b, err)
		}
		return nil
	})
	var h struct{ Status, Reason string }
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "log not writable" || !strings.Contains(h.Reason, "no space left on device") || !strings.Contains(h.Reason, dir) {
		t.Errorf("/readyz body %s", body)
	}
	hr, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health: %v, %v; want NOT_SERVING", hr, err)
	}
	began := time.Now()
	_, err = c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "homelab", Delta: 1})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("IncreaseSize on a full disk: %v, want Unavailable saying no space", err)
	}
	took := time.Since(began)
	if took > 2*time.Second {
		t.Errorf("IncreaseSize took %v to be refused", took)
	}
	t.Logf("IncreaseSize on a full disk refused in %v: %v", took, err)
	// The REST API refuses its writes the same way: 503 with the reason.
	token, err := os.ReadFile(filepath.Join(dir, apiTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://"+apiAddr+"/api/v1/slots/node-1.lan/decommission", strings.NewReader(`{"by":"test","reason":"disk full test"}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(rb), "no space left on device") {
		t.Errorf("REST write on a full disk: %s %s, want 503 saying no space", resp.Status, rb)
	}
	_, metrics, err := getBody("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"claimstream_log_writable 0", `claimstream_log_write_failures_total{reason="unwritable"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		code, b, err := getBody("http://" + apiAddr + "/readyz")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz %d %s %v", code, b, err)
		}
		return nil
	})
	if _, err := c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "homelab", Delta: 1}); err != nil {
		t.Fatalf("IncreaseSize after space came back: %v", err)
	}
	// Health says NOT_SERVING while the views have not yet folded the
	// newest event (the claim just created, the reactors' events after it):
	// it must come back, not be back at the first look.
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if hr, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("gRPC health after recovery: %v, %v", hr, err)
		}
		return nil
	})
	stop()
	c, _, stop = start()
	defer stop()
	ts, err := c.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "homelab"})
	if err != nil {
		t.Fatal(err)
	}
	if ts.TargetSize != 2 {
		t.Fatalf("target size after restart %d, want the 2 acknowledged claims", ts.TargetSize)
	}
}

// The embedded server shuts JetStream down on a storage error (what
// nats-server does on a write it cannot make). serve refuses writes with
// the reason, restarts JetStream by itself, and the views keep following
// the log: a write after the recovery is seen by the views.
func TestServeRecoversWhenJetStreamShutsDown(t *testing.T) {
	o := serveOptions{config: examplePool, configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, _ := newLogger("warn", "text")
	p, err := startPlane(ctx, o, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.emb.Shutdown()
	viewsDone := make(chan error, 1)
	go func() { viewsDone <- p.views.Run(ctx) }()
	p.logs.monitor = natsserver.NewLogMonitor(p.emb, p.logs.health, natsserver.LogMonitorOptions{Every: 20 * time.Millisecond, RestartAfter: 200 * time.Millisecond, Logger: log})
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); p.logs.monitor.Run(ctx) }()
	defer func() { cancel(); <-monitorDone }()
	cfg, err := loadPool(o.config)
	if err != nil {
		t.Fatal(err)
	}
	leadNow(t, ctx, p)
	if err := p.applyPool(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.service.Execute(ctx, decide.IncreaseSize{Group: "homelab", Delta: 1, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}

	if err := p.emb.Server.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	// Refused with the reason until JetStream is back, then accepted.
	var refused error
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		began := time.Now()
		_, err := p.service.Execute(ctx, decide.IncreaseSize{Group: "homelab", Delta: 1, RequestedBy: "test"})
		took := time.Since(began)
		if err != nil {
			if decide.CodeOf(err) == decide.CodeUnavailable {
				refused = err
			}
			if took > 2*time.Second {
				t.Errorf("a refusal took %v: %v", took, err)
			}
			return err
		}
		// Execute returns once the views show the write: they resumed
		// following the log at once, not after a missed heartbeat.
		if took > 3*time.Second {
			t.Errorf("the first write after the recovery took %v to reach the views", took)
		}
		return nil
	})
	if refused != nil && !strings.Contains(refused.Error(), "JetStream") {
		t.Errorf("refusal %q does not say JetStream is down", refused)
	}
	select {
	case err := <-viewsDone:
		t.Fatalf("the views stopped following the log: %v", err)
	default:
	}
}
