package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	yamlFence  = regexp.MustCompile("(?s)```yaml\n(.*?)```")
	groupOfRow = regexp.MustCompile(`(?m)^\s+group: ([a-z0-9.-]+)`)
)

// The pool examples of the docs are pool files this claimstream takes: a
// whole file as it is, a list of slots with their groups declared.
func TestDocsPoolExamplesParse(t *testing.T) {
	for _, doc := range []string{"pool.md", "power.md"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, m := range yamlFence.FindAllStringSubmatch(string(raw), -1) {
			block := m[1]
			file := block
			switch {
			case strings.HasPrefix(block, "groups:"):
			case strings.HasPrefix(block, "  - name:"):
				var groups []string
				for _, g := range groupOfRow.FindAllStringSubmatch(block, -1) {
					if !slices.Contains(groups, g[1]) {
						groups = append(groups, g[1])
					}
				}
				file = "groups:\n"
				for _, g := range groups {
					file += fmt.Sprintf("  - {name: %s}\n", g)
				}
				file += "slots:\n" + block
			default:
				continue
			}
			n++
			if _, err := Parse(fmt.Sprintf("%s example %d", doc, i+1), []byte(file)); err != nil {
				t.Errorf("%v\n%s", err, file)
			}
		}
		if n == 0 {
			t.Errorf("no pool example in docs/%s", doc)
		}
	}
}
