package pool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every field of the pool file's schema is named in docs/pool.md, the
// reference an operator writes the file from.
func TestDocsNameEveryField(t *testing.T) {
	var schema struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "schemas", SchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "pool.md"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for def, d := range schema.Defs {
		for field := range d.Properties {
			if !strings.Contains(string(doc), "`"+field+"`") {
				missing = append(missing, def+"."+field)
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("docs/pool.md does not name these fields (as `field`): %s", strings.Join(missing, ", "))
	}
}
