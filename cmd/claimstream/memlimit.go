package main

import (
	"log/slog"
	"runtime/debug"
)

// defaultMemoryLimit is serve's soft memory limit (the Go runtime's, the
// same knob as GOMEMLIMIT) when GOMEMLIMIT is not set. At 10,000 slots the
// live heap after a restart is about 65-75 MB; with the runtime's default
// (collect when the heap doubles) the process sat at 210-235 MiB RSS,
// mostly garbage of the start (the pool file's parse, the snapshot's
// decode). The limit makes the collector run before that garbage piles up;
// it is soft: a heap that needs more gets more, with more collections.
const defaultMemoryLimit = 128 << 20

// applyMemoryLimit sets defaultMemoryLimit unless the environment set
// GOMEMLIMIT (the runtime read it at start), and returns the limit in force.
func applyMemoryLimit(getenv func(string) string, log *slog.Logger) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(defaultMemoryLimit)
	log.Debug("soft memory limit set (GOMEMLIMIT overrides it)", "bytes", defaultMemoryLimit)
	return defaultMemoryLimit
}
