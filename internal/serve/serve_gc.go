package serve

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// defaultServingGCPercent: once serving, the heap grows to 1.25 times
// what is live before a collection, not twice: a serving plane's heap is
// steady and its collections cheap, so a lower target trades little CPU
// for a smaller RSS (docs/benchmarks.md, "Where serve's memory goes").
const defaultServingGCPercent = 25

// servingGCPercentHelp documents --serving-gc-percent.
const servingGCPercentHelp = "the Go collector's GOGC once serving (the start keeps the default, 100): the heap grows to (1 + N/100) times what is live before a collection; lower holds less memory for more collector CPU (GOGC in the environment wins; 0: leave it)"

// applyServingGCPercent sets the collector's target once the start is over.
// The start's reads want room (a low target during them keeps the collector
// running without pause); serving holds a steady heap that a lower target
// keeps closer to its live size. GOGC in the environment is the operator's
// choice and is left alone. It returns the percentage set (0: none).
func applyServingGCPercent(log *slog.Logger, percent int, getenv func(string) string) int {
	if percent == 0 {
		return 0
	}
	if v := getenv("GOGC"); v != "" {
		log.Info("collector target from GOGC", "gogc", v)
		return 0
	}
	old := debug.SetGCPercent(percent)
	log.Info("collector target once serving", "gc_percent", percent, "was", old)
	return percent
}

// checkServingGCPercent refuses a value the runtime would read otherwise
// (a negative one turns the collector off).
func checkServingGCPercent(percent int) error {
	if percent < 0 {
		return fmt.Errorf("--serving-gc-percent %d: want 0 (leave it) or more", percent)
	}
	return nil
}
