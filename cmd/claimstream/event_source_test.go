package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/pool"
)

// TestEventSourceNamesTheInstallation: --event-source is stamped on every
// event serve writes; without it the source names the installation (the
// namespace in a cluster, the hostname with the simulator); a source that
// is not a URI reference is refused before anything is written.
func TestEventSourceNamesTheInstallation(t *testing.T) {
	host, _ := os.Hostname()
	for _, c := range []struct {
		o    serveOptions
		want string
	}{
		{serveOptions{eventSource: "/claimstream/prod-eu"}, "/claimstream/prod-eu"},
		{serveOptions{cluster: clusterOptions{kubeconfig: "kubeconfig", namespace: "team-a"}}, "/claimstream/team-a"},
		{serveOptions{cluster: clusterOptions{namespace: "claimstream"}}, "/claimstream/" + host},
	} {
		if got, err := eventSource(c.o); err != nil || got != c.want {
			t.Errorf("eventSource(%+v) = %q, %v; want %q", c.o, got, err, c.want)
		}
	}
	if _, err := eventSource(serveOptions{eventSource: "two words"}); err == nil || !strings.Contains(err.Error(), "--event-source") {
		t.Errorf("a source with a space: %v, want an --event-source error", err)
	}
	if _, err := eventSource(serveOptions{eventSource: "/claimstream/café"}); err == nil || !strings.Contains(err.Error(), `"/claimstream/caf%C3%A9"`) {
		t.Errorf("a source the SDK writes in another form: %v, want an error naming the written form", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := startPlane(ctx, serveOptions{dataDir: dir, stream: "CLAIMSTREAM", noFsync: true, eventSource: "bad source"}, quiet, nil, nil); err == nil || !strings.Contains(err.Error(), "--event-source") {
		t.Fatalf("start with a bad --event-source: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused --event-source created the data dir: %v", err)
	}
	p, err := startPlane(ctx, serveOptions{dataDir: dir, stream: "CLAIMSTREAM", noFsync: true, eventSource: "/claimstream/prod-eu"}, quiet, clock.RealClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.emb.Shutdown)
	rctx, stop := context.WithCancel(ctx)
	viewsDone := make(chan error, 1)
	go func() { viewsDone <- p.views.Run(rctx) }()
	defer func() { stop(); <-viewsDone }()
	leadNow(t, ctx, p)
	cfg, err := pool.Load("../../deploy/examples/pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&pool.Applier{Service: p.service, Views: p.views, Clock: p.clock, Log: quiet}).Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := p.store.Read(ctx, 1, p.views.Seq(), func(e events.Event) error {
		n++
		if e.Source != "/claimstream/prod-eu" {
			t.Errorf("seq %d %s has source %q, want /claimstream/prod-eu", e.Seq, e.Type, e.Source)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("the pool file wrote no events")
	}
}
