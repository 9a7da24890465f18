package main

import (
	"log/slog"
	"math"
	"runtime/debug"
	"testing"
)

func TestServeSetsASoftMemoryLimitUnlessGOMEMLIMIT(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	log := slog.New(slog.DiscardHandler)

	debug.SetMemoryLimit(math.MaxInt64) // the runtime's default: no limit
	if got := applyMemoryLimit(func(string) string { return "" }, log); got != defaultMemoryLimit {
		t.Errorf("limit in force %d, want %d", got, defaultMemoryLimit)
	}
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("runtime limit %d, want %d", got, defaultMemoryLimit)
	}

	// GOMEMLIMIT set: the runtime took it at start; serve leaves it.
	debug.SetMemoryLimit(1 << 30)
	env := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	}
	if got := applyMemoryLimit(env, log); got != 1<<30 {
		t.Errorf("with GOMEMLIMIT=1GiB the limit in force is %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("with GOMEMLIMIT=1GiB the runtime limit became %d", got)
	}
}
