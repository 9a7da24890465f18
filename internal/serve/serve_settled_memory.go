package serve

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"k8s.io/utils/clock"
)

// settleDelay is how long after the start-up memory's release serve
// collects once more: by then the embedded server has dropped the block
// caches of the start's reads (the views' catch-up, the saved copies) and
// the first reconcile of every slot is done.
const settleDelay = 30 * time.Second

// releaseSettledMemory collects and returns memory to the system once,
// settleDelay after it is called, unless ctx ends first. The collection at
// serving runs while the start's reads are still in memory: the heap's
// next goal, twice what is live, is then set from them, and the heap grows
// into it, though serving holds much less half a minute later. One more
// collection once that has settled sets the goal from what serving holds.
func releaseSettledMemory(ctx context.Context, log *slog.Logger, clk clock.Clock) {
	t := clk.NewTimer(settleDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C():
	}
	began := time.Now()
	var before, now runtime.MemStats
	runtime.ReadMemStats(&before)
	debug.FreeOSMemory()
	runtime.ReadMemStats(&now)
	log.Info("settled memory returned to the system",
		"heap_live_mib", now.HeapAlloc>>20,
		"heap_live_before_mib", before.HeapAlloc>>20,
		"released_mib", (now.HeapReleased-min(before.HeapReleased, now.HeapReleased))>>20,
		"took", time.Since(began).Round(time.Millisecond))
}
