package projections

import (
	"os"
	"runtime/debug"
	"sync"
)

// HoldReplayGC raises the GC percent to at least percent until restore is
// called, counting every holder: a replay of the views and another long
// replay (a what-if's runs) that overlap never restore each other's value;
// the last one out restores the percent from before the first. While
// several hold, the highest percent asked for stands. A GOGC the operator
// set is left alone.
func HoldReplayGC(percent int) (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	replayGCMu.Lock()
	defer replayGCMu.Unlock()
	if replays == 0 {
		replayGCOld = debug.SetGCPercent(percent)
	} else if cur := debug.SetGCPercent(percent); cur > percent {
		debug.SetGCPercent(cur)
	}
	replays++
	return func() {
		replayGCMu.Lock()
		defer replayGCMu.Unlock()
		if replays--; replays == 0 {
			debug.SetGCPercent(replayGCOld)
		}
	}
}

// replayGC lets the heap grow 4x between collections while a replay runs:
// a replay allocates a short-lived decode per event and keeps little, so
// collecting at the default pace spends much of the replay in the GC.
// Overlapping replays share the setting (HoldReplayGC); the last one out
// restores it. A GOGC the operator set is left alone.
func replayGC() (restore func()) { return HoldReplayGC(400) }

// replays counts the replays that hold the GC percent; replayGCOld is the
// percent from before the first.
var (
	replayGCMu  sync.Mutex
	replays     int
	replayGCOld int
)
