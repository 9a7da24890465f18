// Command claimstream is the claimstream control plane: `serve` runs it, the
// other verbs inspect and operate it (internal/serve, internal/cli,
// internal/power).
package main

import (
	"fmt"
	"os"

	"github.com/claimstream/claimstream/internal/serve"
)

func main() {
	if err := serve.NewRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "claimstream:", err)
		os.Exit(serve.ExitCode(err))
	}
}
