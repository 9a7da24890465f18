package serve

import (
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// --serving-gc-percent sets the collector's target once serving, unless
// GOGC is set (the operator's) or it is 0; a negative one is refused.
func TestServingGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	noEnv := func(string) string { return "" }
	var out strings.Builder
	log := slog.New(slog.NewTextHandler(&out, nil))
	if got := applyServingGCPercent(log, 50, noEnv); got != 50 {
		t.Fatalf("set %d, want 50", got)
	}
	if now := debug.SetGCPercent(100); now != 50 {
		t.Fatalf("the runtime's GOGC is %d, want 50", now)
	}
	if !strings.Contains(out.String(), `msg="collector target once serving" gc_percent=50 was=100`) {
		t.Fatalf("log: %s", out.String())
	}
	out.Reset()
	if got := applyServingGCPercent(log, 50, func(k string) string { return map[string]string{"GOGC": "80"}[k] }); got != 0 {
		t.Fatalf("set %d with GOGC in the environment", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("GOGC in the environment, yet the runtime's is %d", now)
	}
	if !strings.Contains(out.String(), `msg="collector target from GOGC" gogc=80`) {
		t.Fatalf("log: %s", out.String())
	}
	if got := applyServingGCPercent(log, 0, noEnv); got != 0 {
		t.Fatalf("0 set %d", got)
	}
	if err := checkServingGCPercent(-1); err == nil || !strings.Contains(err.Error(), "--serving-gc-percent -1") {
		t.Fatalf("a negative value: %v", err)
	}
	if err := checkServingGCPercent(50); err != nil {
		t.Fatal(err)
	}
}
