package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

func TestServeAppliesThePoolAndResumes(t *testing.T) {
	dir := t.TempDir()
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: dir, stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn"}
	run := func() uint64 {
		ctx, cancel := context.WithCancel(context.Background())
		log, _ := newLogger("warn", "text")
		p, err := startPlane(ctx, o, log)
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
	// A restart resumes from the log, and applying the same file writes nothing.
	if again := run(); again != first {
		t.Fatalf("after restart the log is at %d, before %d", again, first)
	}
}

func TestServeRefusesAnInvalidPoolFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "pool.yaml")
	writeFile(t, bad, "groups:\n  - name: Bad_Name\n    minSize: -1\n")
	err := runServe(context.Background(), serveOptions{config: bad, dataDir: t.TempDir(), logLevel: "info"})
	if err == nil || !strings.Contains(err.Error(), "pool.yaml:2") || !strings.Contains(err.Error(), "minSize") {
		t.Fatalf("got %v, want an error naming the file, line and field", err)
	}
}

func TestConfigValidate(t *testing.T) {
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"config", "validate", filepath.Join("..", "..", "deploy", "examples", "pool.yaml")})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ok") {
		t.Fatalf("output %q", out.String())
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
