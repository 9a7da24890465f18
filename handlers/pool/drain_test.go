package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
)

func TestDrainSettings(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte("groups:\n  - name: g\n    drainTimeout: 5m\n    onDrainTimeout: force\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Groups[0].Spec; s.DrainTimeout.D() != 5*time.Minute || s.OnDrainTimeout != events.DrainForce {
		t.Fatalf("spec %+v", s)
	}
	cfg, err = Parse("x.yaml", []byte("groups:\n  - name: g\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Groups[0].Spec; s.DrainTimeout != 0 || s.OnDrainTimeout != "" {
		t.Fatalf("defaults are left to the reader: %+v", s)
	}
	for _, c := range []struct{ yaml, want string }{
		{"groups:\n  - name: g\n    onDrainTimeout: kill\n", "groups[0].onDrainTimeout"},
		{"groups:\n  - name: g\n    drainTimeout: soon\n", "groups[0].drainTimeout"},
		{"groups:\n  - name: g\n    drainTimeout: \"0\"\n", "groups[0].drainTimeout"},
	} {
		_, err := Parse("x.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want one naming %s", c.yaml, err, c.want)
		}
	}
}

func TestBuiltinExamplePoolFile(t *testing.T) {
	cfg, err := parseFile(t, "../../deploy/examples/builtin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Groups[0].Spec
	if g.Scaler != events.ScalerBuiltin || g.Builtin == nil || g.Builtin.MaxNodes != 3 || g.OnDrainTimeout != events.DrainEvict || len(cfg.Slots) != 3 {
		t.Fatalf("%+v", cfg)
	}
}
