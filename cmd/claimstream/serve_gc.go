package main

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// defaultServingGCPercent: once serving, the heap grows to 1.25 times
// what is live before a collection, not twice. At 10,000 slots and 1M
// events (with their power facts) the RSS read every 10 s from 40 s to 3
// minutes after serving had a median of 149 MiB with 50 and 124 to 132
// MiB with 25, for no more CPU that those runs could see
// (docs/benchmarks.md, "Where serve's memory goes").
const defaultServingGCPercent = 25

// servingGCPercentHelp documents --serving-gc-percent.
const servingGCPercentHelp = "the Go collector's GOGC once serving (the start keeps the default, 100): the heap grows to (1 + N/100) times what is live before a collection; lower holds less memory for more collector CPU (GOGC in the environment wins; 0: leave it)"

// applyServingGCPercent sets the collector's target once the start is
// over. The start's reads want room (a low target during them made the
// collector run without pause: docs/benchmarks.md); serving holds a steady
// heap that a lower target keeps closer to its live size. GOGC in the
// environment is the operator's choice and is left alone. It returns the
// percentage set (0: none).
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
