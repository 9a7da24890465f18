package serve

import (
	"runtime"
	"strings"
)

// blockedIn says whether a goroutine is parked in state (e.g. "chan
// receive") directly in function of this package (e.g.
// "(*plane).withSinks"): a barrier that shows a
// wait has begun, where a test would otherwise watch for a while that
// nothing happens. A test binary names this package by its import path,
// not main.
func blockedIn(function, state string) bool {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, frames, ok := strings.Cut(g, "\n")
		if !ok || !strings.Contains(header, "["+state) {
			continue
		}
		for _, line := range strings.Split(frames, "\n") {
			if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "runtime.") {
				continue
			}
			if strings.HasPrefix(line, "main."+function+"(") || strings.HasPrefix(line, "github.com/claimstream/claimstream/internal/serve."+function+"(") {
				return true
			}
			break
		}
	}
	return false
}
