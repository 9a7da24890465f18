package projections

// HoldReplayGC raises the GC percent as a replay of the views does
// (replayGC) until restore is called: another long replay (a what-if's
// runs) shares the one setting and the one count, so overlapping holders
// never restore each other's value.
func HoldReplayGC() (restore func()) { return replayGC() }
