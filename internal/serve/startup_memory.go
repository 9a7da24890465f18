package serve

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"
)

// releaseStartupMemory returns the start-up's garbage to the system once the
// pool file is applied. The start decodes the views' snapshot and parses the
// pool file at the same time (all garbage once applied); the runtime would
// return those pages only slowly, and a plane's RSS is what its pod is judged
// by. Forced collections and a scavenge, once: no soft memory limit, which
// would slow JetStream's recovery. It waits for after (when not nil) to be
// closed: the timeline index's first build, whose garbage is the start's too.
// Two collections: the first only moves the embedded server's pooled block
// buffers aside (sync.Pool keeps them one cycle more), the second frees them,
// so the heap's next goal is set from what serving holds.
func releaseStartupMemory(log *slog.Logger, after <-chan struct{}) {
	if after != nil {
		<-after
	}
	began := time.Now()
	var before, now runtime.MemStats
	runtime.ReadMemStats(&before)
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&now)
	log.Info("start-up memory returned to the system",
		"heap_live_mib", now.HeapAlloc>>20,
		"released_mib", (now.HeapReleased-min(before.HeapReleased, now.HeapReleased))>>20,
		"took", time.Since(began).Round(time.Millisecond))
}
