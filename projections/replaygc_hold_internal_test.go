package projections

import (
	"runtime/debug"
	"testing"
)

func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// A long replay's hold (a what-if's runs) and the views' replays overlap
// in any order: the highest percent stands while any holds, and the
// percent from before the first comes back when the last lets go.
func TestOverlappingGCHoldsRestoreThePercentFromBeforeTheFirst(t *testing.T) {
	t.Setenv("GOGC", "")
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })

	views := replayGC()
	if p := gcPercent(); p != 400 {
		t.Fatalf("a replay of the views: GC percent %d, want 400", p)
	}
	whatif := HoldReplayGC(800)
	if p := gcPercent(); p != 800 {
		t.Fatalf("a what-if during it: GC percent %d, want 800", p)
	}
	views()
	if p := gcPercent(); p != 800 {
		t.Fatalf("the replay done, the what-if not: GC percent %d, want 800", p)
	}
	again := replayGC()
	if p := gcPercent(); p != 800 {
		t.Fatalf("another replay during the what-if: GC percent %d, want 800", p)
	}
	whatif()
	again()
	if p := gcPercent(); p != 100 {
		t.Fatalf("all done: GC percent %d, want 100 as before", p)
	}
}
