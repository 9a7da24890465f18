package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/freeport"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

func TestServeAppliesThePoolAndResumes(t *testing.T) {
	dir := t.TempDir()
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: dir, stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn"}
	run := func() uint64 {
		ctx, cancel := context.WithCancel(context.Background())
		log, _ := newLogger("warn", "text")
		p, err := startPlane(ctx, o, log, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.emb.Shutdown()
		defer cancel()
		go func() { _ = p.views.Run(ctx) }()
		cfg, err := loadPool(o.config)
		if err != nil {
			t.Fatal(err)
		}
		leadNow(t, ctx, p)
		if err := p.applyPool(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		var groups, slots int
		p.views.Read(func(s *projections.State) {
			for _, g := range s.Groups {
				if !g.Retired {
					groups++
				}
			}
			for _, sl := range s.Slots {
				if !sl.Retired {
					slots++
				}
			}
		})
		if groups != len(cfg.Groups) || slots != len(cfg.Slots) {
			t.Fatalf("views hold %d groups and %d slots, the file %d and %d", groups, slots, len(cfg.Groups), len(cfg.Slots))
		}
		eventstest.ValidateLog(t, p.store)
		return p.views.Seq()
	}
	first := run()
	if first == 0 {
		t.Fatal("applying the pool wrote nothing")
	}
	// A restart resumes from the log, and applying the same file writes
	// nothing: the one new event is the new term's LeaderElected.
	if again := run(); again != first+1 {
		t.Fatalf("after restart the log is at %d, before %d", again, first)
	}
}

func TestServeRefusesAnInvalidPoolFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "pool.yaml")
	writeFile(t, bad, "groups:\n  - name: Bad_Name\n    minSize: -1\n")
	err := runServe(context.Background(), serveOptions{config: bad, dataDir: t.TempDir(), logLevel: "info", plaintext: true})
	if err == nil || !strings.Contains(err.Error(), "pool.yaml:2") || !strings.Contains(err.Error(), "minSize") {
		t.Fatalf("got %v, want an error naming the file, line and field", err)
	}
}

func TestConfigValidate(t *testing.T) {
	var out bytes.Buffer
	root := NewRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"config", "validate", filepath.Join("..", "..", "deploy", "examples", "pool.yaml")})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ok") {
		t.Fatalf("output %q", out.String())
	}
}

func writeFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// freeAddr is a free port below the ephemeral range (internal/freeport).
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// serve end to end: the provider answers from the applied pool, a claim
// made over gRPC survives a restart.
func TestServeProvider(t *testing.T) {
	addr := freeAddr(t)
	apiAddr, metricsAddr := freeAddr(t), freeAddr(t)
	// A webhook sink that takes ClaimCreated events.
	var mu sync.Mutex
	var delivered []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delivered = append(delivered, r.Header.Get("ce-type"))
		mu.Unlock()
	}))
	defer hook.Close()
	sinksFile := filepath.Join(t.TempDir(), "sinks.yaml")
	writeFile(t, sinksFile, "sinks:\n  - name: hook\n    url: "+hook.URL+"\n    types: [ClaimCreated]\n    start: all\n")
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn", grpcAddress: addr, plaintext: true, apiAddress: apiAddr, metricsAddress: metricsAddr, sinks: sinksFile}
	start := func() (pb.CloudProviderClient, func()) {
		conn, stop := startServe(t, o)
		return pb.NewCloudProviderClient(conn), stop
	}
	c, stop := start()
	ctx := context.Background()
	groups, err := c.NodeGroups(ctx, &pb.NodeGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// burst is a builtin group: invisible to cluster-autoscaler.
	if len(groups.NodeGroups) != 1 || groups.NodeGroups[0].Id != "homelab" || groups.NodeGroups[0].MaxSize != 3 {
		t.Fatalf("node groups %v", groups.NodeGroups)
	}
	if _, err := c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "homelab", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	// The CLI sees the claim through the REST API, with the token serve
	// generated in its data dir; without the token it is refused.
	token, err := os.ReadFile(filepath.Join(o.dataDir, apiTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	root := NewRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"get", "claims", "--server", "http://" + apiAddr, "--token", strings.TrimSpace(string(token))})
	if err := root.Execute(); err != nil {
		t.Fatalf("claimstream get claims: %v", err)
	}
	if !strings.Contains(out.String(), "homelab") || !strings.Contains(out.String(), "cluster-autoscaler") {
		t.Fatalf("get claims:\n%s", out.String())
	}
	root = NewRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"get", "claims", "--server", "http://" + apiAddr, "--token", "wrong"})
	if err := root.Execute(); err == nil {
		t.Fatal("a wrong token was accepted")
	}
	// The sink delivered the claim's creation; the metrics count the claim.
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(delivered) != 1 || delivered[0] != "dev.claimstream.ClaimCreated.v1" {
			return fmt.Errorf("webhook got %v", delivered)
		}
		return nil
	})
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `claimstream_claims{`) || !strings.Contains(string(body), `group="homelab"`) {
			return fmt.Errorf("metrics lack claimstream_claims for homelab")
		}
		return nil
	})
	stop()
	c, stop = start()
	defer stop()
	ts, err := c.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "homelab"})
	if err != nil {
		t.Fatal(err)
	}
	if ts.TargetSize != 1 {
		t.Fatalf("target size after restart %d, want 1", ts.TargetSize)
	}
}

func TestServeRefusesAProviderWithoutTLS(t *testing.T) {
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), dataDir: t.TempDir(), logLevel: "warn", grpcAddress: "127.0.0.1:0"}
	err := runServe(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "--plaintext") {
		t.Fatalf("got %v, want an error naming the TLS flags", err)
	}
}

// docs/operations/serve-flags.md lists every flag of serve.
func TestOperationsDocListsEveryServeFlag(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations", "serve-flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	newServe().Flags().VisitAll(func(f *pflag.Flag) {
		mention := "--" + f.Name + " "
		if f.Deprecated != "" {
			mention = "`--" + f.Name // listed under the retired flags
		}
		if !strings.Contains(string(doc), mention) {
			t.Errorf("docs/operations/serve-flags.md does not mention --%s", f.Name)
		}
	})
}

// startTestPlane starts serve's plane (store, views, command service) on o
// without its servers; it is shut down when the test ends.
func startTestPlane(t *testing.T, ctx context.Context, o serveOptions) *plane {
	t.Helper()
	log, _ := newLogger("warn", "text")
	p, err := startPlane(ctx, o, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.emb.Shutdown)
	return p
}

// startServe runs serve with o until the returned stop, and connects to its
// provider once it answers NodeGroups.
func startServe(t *testing.T, o serveOptions) (*grpc.ClientConn, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	conn, err := grpc.NewClient(o.grpcAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c := pb.NewCloudProviderClient(conn)
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		_, err := c.NodeGroups(context.Background(), &pb.NodeGroupsRequest{})
		return err
	})
	return conn, func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}
