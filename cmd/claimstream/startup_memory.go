package main

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"
)

// releaseStartupMemory returns the start-up's garbage to the system once
// the pool file is applied. The start decodes the views' snapshot and
// parses the pool file at the same time (tens of MiB at 10,000 slots, all
// garbage once applied); the runtime would return those pages only slowly,
// and a plane's RSS is what its pod is judged by. One forced collection
// and scavenge, once: no soft memory limit, which slowed JetStream's
// recovery (docs/benchmarks.md).
func releaseStartupMemory(log *slog.Logger) {
	began := time.Now()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	log.Info("start-up memory returned to the system",
		"heap_live_mib", after.HeapAlloc>>20,
		"released_mib", (after.HeapReleased-min(before.HeapReleased, after.HeapReleased))>>20,
		"took", time.Since(began).Round(time.Millisecond))
}
