package main

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

var startupGarbage [][]byte

// TestReleaseStartupMemoryReturnsGarbage: after a start-up's worth of
// garbage (64 MiB allocated and dropped), releaseStartupMemory hands the
// freed pages back to the system at once and says so in one log line.
func TestReleaseStartupMemoryReturnsGarbage(t *testing.T) {
	for range 64 {
		startupGarbage = append(startupGarbage, bytes.Repeat([]byte{1}, 1<<20))
	}
	startupGarbage = nil
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var out strings.Builder
	releaseStartupMemory(slog.New(slog.NewTextHandler(&out, nil)))
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	held := func(m runtime.MemStats) uint64 { return m.HeapSys - m.HeapReleased }
	t.Logf("heap held from the system: %d MiB before, %d MiB after; %s", held(before)>>20, held(after)>>20, strings.TrimSpace(out.String()))
	if held(before)-min(held(before), held(after)) < 48<<20 {
		t.Fatalf("heap held from the system went from %d to %d MiB: the garbage was not returned", held(before)>>20, held(after)>>20)
	}
	if !strings.Contains(out.String(), `msg="start-up memory returned to the system"`) {
		t.Fatalf("log: %q", out.String())
	}
}
