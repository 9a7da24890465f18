package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// In a cluster, the default source names the cluster by the kube-system
// Namespace's UID, so two clusters with the same namespace differ; if that
// Namespace cannot be read, serve keeps /claimstream/<namespace> and says
// why, once.
func TestDefaultEventSourceNamesTheCluster(t *testing.T) {
	o := serveOptions{cluster: clusterOptions{kubeconfig: "kubeconfig", namespace: "team-a"}}
	kubeSystem := func(uid string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: types.UID(uid)}}
	}
	source := func(t *testing.T, cs *fake.Clientset) (string, string) {
		t.Helper()
		var logged strings.Builder
		log := slog.New(slog.NewTextHandler(&logged, nil))
		o := o
		o.eventSource = clusterEventSource(context.Background(), o, cs.CoreV1(), log)
		src, err := eventSource(o)
		if err != nil {
			t.Fatal(err)
		}
		return src, logged.String()
	}

	a, logged := source(t, fake.NewClientset(kubeSystem("6f0c1d2e-0b7a-4c1e-9a57-3f0e8c2b4d11")))
	if a != "/claimstream/6f0c1d2e-0b7a-4c1e-9a57-3f0e8c2b4d11/team-a" || logged != "" {
		t.Errorf("source %q (log %q), want /claimstream/<kube-system UID>/team-a and no warning", a, logged)
	}
	if b, _ := source(t, fake.NewClientset(kubeSystem("0d4e8a35-7c61-4f0b-8e2a-91b5c7d3e604"))); b == a {
		t.Errorf("two clusters, one source %q", b)
	}

	forbidden := fake.NewClientset(kubeSystem("6f0c1d2e-0b7a-4c1e-9a57-3f0e8c2b4d11"))
	forbidden.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", errors.New("no RBAC"))
	})
	for name, cs := range map[string]*fake.Clientset{"forbidden": forbidden, "missing": fake.NewClientset()} {
		src, logged := source(t, cs)
		if src != "/claimstream/team-a" {
			t.Errorf("%s: source %q, want the namespace-only /claimstream/team-a", name, src)
		}
		if n := strings.Count(logged, "level=WARN"); n != 1 || !strings.Contains(logged, "does not name the cluster") {
			t.Errorf("%s: want one warning saying why, got %q", name, logged)
		}
		if name == "forbidden" && !strings.Contains(logged, "namespaces/kube-system") {
			t.Errorf("forbidden: the warning does not name the rule: %q", logged)
		}
	}

	// A given source and the simulator are not looked up.
	given := serveOptions{eventSource: "/claimstream/prod-eu", cluster: o.cluster}
	if got := eventSourceOf(context.Background(), given, slog.New(slog.NewTextHandler(io.Discard, nil))); got != "/claimstream/prod-eu" {
		t.Errorf("--event-source replaced by %q", got)
	}
}
