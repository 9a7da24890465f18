package pool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// FuzzParse: any bytes given as a pool file are either refused with a
// *ConfigError of bounded text, or accepted as a Config that reconciles
// with empty views and reads back the same once written out as a file.
// Parse must never panic and must stay fast whatever its aliases say.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	seeds = append(seeds, filepath.Join("..", "..", "deploy", "examples", "pool.yaml"))
	for _, path := range seeds {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"a: &a [*a, *a]\n",
		"groups:\n  - &g {name: a, minSize: 0, maxSize: 0}\n  - <<: *g\n    name: b\n",
		"a0: &a0 [x, x, x, x]\na1: &a1 [*a0, *a0, *a0, *a0]\na2: [*a1, *a1, *a1, *a1]\ngroups: []\n",
		"groups: []\n---\n",
		"groups: [{name: g, maxSize: 1}]\nslots: [{name: s, group: g, capacity: {cpu: 1.5}}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		cfg, err := Parse("f.yaml", data)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Parse took %s on %d bytes", d, len(data))
		}
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *ConfigError: %v", err)
			}
			if len(ce.Problems) == 0 {
				t.Fatal("a *ConfigError without problems")
			}
			if n := strings.Count(err.Error(), "\n") + 1; n > MaxShownProblems+1 {
				t.Fatalf("error has %d lines", n)
			}
			return
		}
		if _, err := Reconcile(cfg, projections.NewState(), time.Unix(1e9, 0).UTC()); err != nil {
			t.Fatalf("accepted file does not reconcile: %v", err)
		}
		again, err := Parse("f.yaml", writeOut(t, cfg))
		if err != nil {
			t.Fatalf("accepted file, written out, is refused: %v\n%s", err, writeOut(t, cfg))
		}
		if !sameDecl(cfg, again) {
			t.Fatalf("accepted file reads back differently:\n%+v\n%+v", cfg, again)
		}
	})
}

// writeOut writes a Config back as a pool file: each entry is its spec's
// JSON (YAML is a superset) with the name, and the slot's group, added.
func writeOut(t *testing.T, cfg *Config) []byte {
	t.Helper()
	entry := func(spec any, extra map[string]any) map[string]any {
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	file := map[string][]map[string]any{"groups": {}, "slots": {}}
	for _, g := range cfg.Groups {
		file["groups"] = append(file["groups"], entry(g.Spec, map[string]any{"name": g.Name}))
	}
	for _, s := range cfg.Slots {
		m := entry(s.Spec, map[string]any{"name": s.Name, "group": s.Group})
		// A driver's Jobs are written as the slot's power block.
		for _, job := range []struct {
			key  string
			spec *events.JobSpec
		}{{"startup", s.Spec.Startup}, {"shutdown", s.Spec.Shutdown}} {
			if job.spec == nil || job.spec.Power == nil {
				continue
			}
			p := entry(job.spec.Power, nil)
			if ttl := job.spec.TTLSecondsAfterFinished; ttl != nil {
				p["ttlSecondsAfterFinished"] = *ttl
			}
			m["power"] = p
			delete(m, job.key)
		}
		file["slots"] = append(file["slots"], m)
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameDecl compares the declarations of two Configs, not their lines.
func sameDecl(a, b *Config) bool {
	if len(a.Groups) != len(b.Groups) || len(a.Slots) != len(b.Slots) {
		return false
	}
	for i := range a.Groups {
		if a.Groups[i].Name != b.Groups[i].Name || !reflect.DeepEqual(jsonOf(a.Groups[i].Spec), jsonOf(b.Groups[i].Spec)) {
			return false
		}
	}
	for i := range a.Slots {
		x, y := a.Slots[i], b.Slots[i]
		if x.Name != y.Name || x.Group != y.Group || !reflect.DeepEqual(jsonOf(x.Spec), jsonOf(y.Spec)) {
			return false
		}
	}
	return true
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
