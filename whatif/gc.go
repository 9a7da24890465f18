package whatif

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"

	"github.com/claimstream/claimstream/projections"
)

// RunGCPercent is the GC percent while a what-if's runs go: they allocate
// a short-lived copy or decode of nearly everything they touch and keep
// little, so the GC runs at a ninth of its default pace then: at the
// default pace collection is a large share of a replay's CPU.
const RunGCPercent = 800

// RunMemoryHeadroom is how far a what-if lets the process's memory grow
// while its runs go (when the process has no limit of its own): the soft
// memory limit is what the Go runtime held when they began plus this. It
// bounds what RunGCPercent lets the heap grow to; near it the GC collects
// as often as it must to stay under it. Relative, because the process may
// hold much already (serve's views; the benchmark's recorded week): a fixed
// limit would leave the runs collecting at it, spending CPU for nothing.
const RunMemoryHeadroom int64 = 3 << 30

// goMemoryInUse is the memory the Go runtime holds, as the memory limit
// counts it: everything mapped less what was returned to the system.
func goMemoryInUse() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

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
			debug.SetMemoryLimit(goMemoryInUse() + RunMemoryHeadroom)
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
