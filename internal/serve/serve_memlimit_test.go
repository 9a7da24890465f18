package serve

import (
	"bytes"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseCgroupMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit int64
		ok    bool
		err   string
	}{
		{in: "536870912\n", limit: 512 << 20, ok: true},
		{in: "max\n"},
		{in: "9223372036854771712\n"}, // cgroup v1's "no limit"
		{in: "0\n", err: "a limit of 0 bytes"},
		{in: "512Mi\n", err: `not a byte count or "max": "512Mi"`},
		{in: "", err: "not a byte count"},
		{in: "-1", err: "not a byte count"},
	} {
		limit, ok, err := parseCgroupMemoryLimit(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || ok {
				t.Errorf("%q: %d %v %v, want error %q", c.in, limit, ok, err, c.err)
			}
			continue
		}
		if err != nil || ok != c.ok || limit != c.limit {
			t.Errorf("%q: %d %v %v, want %d %v", c.in, limit, ok, err, c.limit, c.ok)
		}
	}
}

func FuzzParseCgroupMemoryLimit(f *testing.F) {
	for _, s := range []string{"536870912\n", "max\n", "9223372036854771712", "0", "x", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		limit, ok, err := parseCgroupMemoryLimit(s)
		if err != nil && ok {
			t.Fatalf("%q: both a limit and an error", s)
		}
		if ok && (limit <= 0 || limit >= cgroupUnlimited) {
			t.Fatalf("%q: limit %d", s, limit)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Fatalf("%q: error too long: %v", s, err)
		}
	})
}

// keepMemoryLimit restores the runtime's soft memory limit after the test.
func keepMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
}

// In a container with a memory limit (cgroup v2 or v1), serve's runtime
// aims at 90% of it; with none, or with GOMEMLIMIT set, it sets nothing.
func TestContainerMemoryLimitSetsASoftLimit(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, c := range []struct {
		name  string
		files fstest.MapFS
		want  int64
	}{
		{"cgroup v2", fstest.MapFS{"memory.max": {Data: []byte("536870912\n")}}, int64(math.Floor(512 << 20 * 0.9))},
		{"cgroup v1", fstest.MapFS{"memory/memory.limit_in_bytes": {Data: []byte("1073741824\n")}}, int64(math.Floor(1 << 30 * 0.9))},
		{"cgroup v2 without a limit", fstest.MapFS{"memory.max": {Data: []byte("max\n")}}, 0},
		{"cgroup v1 without a limit", fstest.MapFS{"memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")}}, 0},
		{"no cgroup", fstest.MapFS{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			keepMemoryLimit(t)
			before := debug.SetMemoryLimit(-1)
			got := applyContainerMemoryLimit(slog.New(slog.DiscardHandler), c.files, noEnv)
			if got != c.want {
				t.Fatalf("limit set %d, want %d", got, c.want)
			}
			now := debug.SetMemoryLimit(-1)
			if c.want == 0 && now != before || c.want != 0 && now != c.want {
				t.Errorf("runtime's limit %d (before %d), want %d", now, before, c.want)
			}
		})
	}
}

// GOMEMLIMIT is the operator's: serve leaves it; an unreadable limit is
// reported and changes nothing.
func TestContainerMemoryLimitLeavesGOMEMLIMITAndBadFiles(t *testing.T) {
	keepMemoryLimit(t)
	before := debug.SetMemoryLimit(-1)
	cg := fstest.MapFS{"memory.max": {Data: []byte("536870912\n")}}
	env := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "300MiB"
		}
		return ""
	}
	if got := applyContainerMemoryLimit(slog.New(slog.DiscardHandler), cg, env); got != 0 || debug.SetMemoryLimit(-1) != before {
		t.Fatalf("with GOMEMLIMIT set, serve set a limit of %d", got)
	}
	var out bytes.Buffer
	bad := fstest.MapFS{"memory.max": {Data: []byte("lots\n")}}
	if got := applyContainerMemoryLimit(slog.New(slog.NewTextHandler(&out, nil)), bad, func(string) string { return "" }); got != 0 || debug.SetMemoryLimit(-1) != before {
		t.Fatalf("with a garbled memory.max, serve set a limit of %d", got)
	}
	if !strings.Contains(out.String(), "level=WARN") || !strings.Contains(out.String(), `memory.max: not a byte count`) {
		t.Errorf("no clear warning of the garbled limit: %s", out.String())
	}
}
