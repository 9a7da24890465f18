// Command gen writes the pool part of deploy/chart/values.schema.json
// from schemas/pool.schema.json (package chartschema); run from the
// repository's root by `go tool task generate:chartschema`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/claimstream/claimstream/internal/chartschema"
)

func main() {
	out := flag.String("o", chartschema.ValuesSchemaPath, "file to write")
	flag.Parse()
	doc, err := chartschema.Generate(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write the values schema:", err)
		os.Exit(1)
	}
}
