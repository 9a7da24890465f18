// Command gen writes docs/asyncapi.yaml (package asyncapi); run from the
// repository's root by `go tool task generate:asyncapi`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/claimstream/claimstream/internal/asyncapi"
)

func main() {
	out := flag.String("o", asyncapi.Path, "file to write")
	flag.Parse()
	doc, err := asyncapi.Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write the AsyncAPI document:", err)
		os.Exit(1)
	}
}
