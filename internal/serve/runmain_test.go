package serve

import (
	"fmt"
	"os"
)

// runMain is cmd/claimstream's main, for the tests that run their own
// binary as a claimstream process.
func runMain() {
	if err := NewRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "claimstream:", err)
		os.Exit(ExitCode(err))
	}
}
