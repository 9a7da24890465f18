package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	log, _ := newLogger("warn", "text")
	p, err := startPlane(ctx, o, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.emb.Shutdown()
	go func() { _ = p.views.Run(ctx) }()
	cfg, err := loadPool(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint64{1100, 1100} {
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
