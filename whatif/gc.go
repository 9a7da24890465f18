package whatif

import (
	"math"
	"os"
	"runtime/debug"
	"sync"

	"github.com/claimstream/claimstream/projections"
)

// RunMemoryLimit is the soft memory limit a what-if sets while its runs go
// (when the process has none): the runs allocate a short-lived copy or
// decode of nearly everything they touch and keep little, so the GC runs
// at a quarter of its default pace then (projections.HoldReplayGC, GOGC
// 400), and this limit bounds what that lets the heap grow to: near it the
// GC collects as often as it must to stay under it.
const RunMemoryLimit int64 = 3 << 30

// holdRunGC sets the what-if GC pace and limit until restore is called.
// Overlapping what-ifs share them; the last one out restores the limit. A
// GOGC or GOMEMLIMIT the operator set is left alone, and so is a limit the
// process set itself (serve's, from its cgroup).
func holdRunGC() (restore func()) {
	restoreGC := projections.HoldReplayGC()
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
