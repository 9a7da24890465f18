package whatif

import (
	"math"
	"os"
	"runtime/debug"
	"sync"

	"github.com/claimstream/claimstream/projections"
)

// RunGCPercent is the GC percent while a what-if's runs go: they allocate
// a short-lived copy or decode of nearly everything they touch and keep
// little, so the GC runs at a ninth of its default pace then (a busy day:
// 14% of the CPU in the GC at the default, about 5% at 400, and 400 to
// 800 took another sixth of the CPU off, docs/benchmarks.md).
const RunGCPercent = 800

// RunMemoryLimit is the soft memory limit a what-if sets while its runs go
// (when the process has none): it bounds what RunGCPercent lets the heap
// grow to; near it the GC collects as often as it must to stay under it.
const RunMemoryLimit int64 = 3 << 30

// holdRunGC sets the what-if GC pace and limit until restore is called.
// Overlapping what-ifs share them; the last one out restores the limit. A
// GOGC or GOMEMLIMIT the operator set is left alone, and so is a limit the
// process set itself (serve's, from its cgroup).
func holdRunGC() (restore func()) {
	restoreGC := projections.HoldReplayGC(RunGCPercent)
	runGCMu.Lock()
	defer runGCMu.Unlock()
	if runGCHolders == 0 {
		runGCLimitSet = false
		if os.Getenv("GOMEMLIMIT") == "" && debug.SetMemoryLimit(-1) == math.MaxInt64 {
			debug.SetMemoryLimit(RunMemoryLimit)
			runGCLimitSet = true
		}
	}
	runGCHolders++
	var once sync.Once
	return func() {
		once.Do(func() {
			runGCMu.Lock()
			if runGCHolders--; runGCHolders == 0 && runGCLimitSet {
				debug.SetMemoryLimit(math.MaxInt64)
				runGCLimitSet = false
			}
			runGCMu.Unlock()
			restoreGC()
		})
	}
}

var (
	runGCMu       sync.Mutex
	runGCHolders  int
	runGCLimitSet bool
)
