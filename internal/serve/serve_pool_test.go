package serve

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
)

// TestServeAppliesAPoolAboveTheBatchLimit: a first pool of 1,000 slots in
// 100 groups (1,100 declarations, more than one atomic append holds) applies
// at start, and applying it again writes nothing.
func TestServeAppliesAPoolAboveTheBatchLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("groups:\n")
	for g := range 100 {
		fmt.Fprintf(&b, "  - name: rack-%d\n", g)
	}
	b.WriteString("slots:\n")
	for g := range 100 {
		for i := range 10 {
			fmt.Fprintf(&b, "  - name: rack-%d-node-%d\n    group: rack-%d\n", g, i, g)
		}
	}
	file := filepath.Join(t.TempDir(), "pool.yaml")
	writeFile(t, file, b.String())

	o := serveOptions{config: file, configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startTestPlane(t, ctx, o)
	go func() { _ = p.views.Run(ctx) }()
	cfg, err := loadPool(file)
	if err != nil {
		t.Fatal(err)
	}
	leadNow(t, ctx, p) // LeaderElected is seq 1
	for _, want := range []uint64{1101, 1101} {
		if err := p.applyPool(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if got := p.views.Seq(); got != want {
			t.Fatalf("the log is at %d, want %d", got, want)
		}
	}
	p.views.Read(func(s *projections.State) {
		if g, ok := s.ActiveGroup("rack-99"); !ok || len(g.Slots) != 10 || len(s.Slots) != 1000 {
			t.Errorf("views: rack-99 %+v, %d slots", g, len(s.Slots))
		}
	})
}

// TestServeReportsARefusedPoolFile: a pool file lowering maxSize below the
// live claims is refused with the group, the count and the new maxSize,
// changes nothing, and shows on the scrape endpoint.
func TestServeReportsARefusedPoolFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pool.yaml")
	poolWith := func(maxSize int) string {
		return fmt.Sprintf("groups:\n  - name: rack\n    maxSize: %d\nslots:\n  - {name: n-1, group: rack}\n  - {name: n-2, group: rack}\n  - {name: n-3, group: rack}\n", maxSize)
	}
	writeFile(t, file, poolWith(3))

	o := serveOptions{config: file, configPoll: time.Hour, dataDir: filepath.Join(dir, "data"), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, _ := newLogger("warn", "text")
	tel, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "claimstream", Prometheus: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	p, err := startPlane(ctx, o, log, nil, tel)
	if err != nil {
		t.Fatal(err)
	}
	defer p.emb.Shutdown()
	go func() { _ = p.views.Run(ctx) }()
	leadNow(t, ctx, p)
	apply := func() error {
		cfg, err := loadPool(file)
		if err != nil {
			t.Fatal(err)
		}
		return p.applyPool(ctx, cfg)
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.service.Execute(ctx, decide.IncreaseSize{Group: "rack", Delta: 2, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	before := p.views.Seq()

	writeFile(t, file, poolWith(1))
	err = apply()
	if err == nil || !strings.Contains(err.Error(), "group rack has 2 live claims, more than the new maxSize 1") {
		t.Fatalf("got %v, want the maxSize refusal", err)
	}
	if p.views.Seq() != before {
		t.Errorf("a refused pool file moved the log from %d to %d", before, p.views.Seq())
	}
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{"claimstream_pool_file_applied 0\n", `claimstream_pool_file_apply_failures_total{reason="refused"} 1` + "\n"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("the scrape has no %q", want)
		}
	}
}
