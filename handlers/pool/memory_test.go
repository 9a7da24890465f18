package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tenThousandSlots is a pool file of 10,000 slots in 100 groups, each with
// an address, a label and a capacity: serve's benchmark pool.
func tenThousandSlots() []byte {
	var w strings.Builder
	w.WriteString("groups:\n")
	for g := range 100 {
		fmt.Fprintf(&w, "  - name: g%d\n", g)
	}
	w.WriteString("slots:\n")
	for s := range 10_000 {
		fmt.Fprintf(&w, "  - {name: node-%d.lan, group: g%d, address: 10.0.%d.%d, labels: {example.com/rack: r%d}, capacity: {cpu: \"8\", memory: 32Gi}}\n",
			s, s%100, s/256, s%256, s%10)
	}
	return []byte(w.String())
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A parsed pool file is held for as long as serve runs (it is reconciled
// again, and its problems found then are reported at their lines). What
// it holds is the decoded slots and the lines of the file, not the parsed
// document the checks walked nor each value's display path: at 10,000
// slots, under 16 MiB.
func TestParsedPoolHoldsNoDocument(t *testing.T) {
	data := tenThousandSlots()
	before := liveHeap()
	cfg, err := Parse("pool.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	after := liveHeap()
	runtime.KeepAlive(cfg)
	held := after - min(before, after)
	t.Logf("a parsed pool of %d slots holds %.1f MiB", len(cfg.Slots), float64(held)/(1<<20))
	if held > 16<<20 {
		t.Errorf("a parsed pool of 10,000 slots holds %.1f MiB, want under 16 MiB", float64(held)/(1<<20))
	}
}

// What a Config keeps of its file names every value at the same line and
// path as the parsed tree did, and a missing field at its object's line,
// for the example pools (lists, merges, keys that need quoting).
func TestFileLinesAgreeWithTheTree(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		doc, p := parseYAML(data)
		if p != nil || checkAliases(doc) != nil {
			continue // not a pool file
		}
		tr := newTree(doc)
		if root, ok := tr.root.(map[string]any); !ok || root["slots"] == nil && root["groups"] == nil {
			continue
		}
		fl := linesOf(tr)
		for ptr, pl := range tr.where {
			if got := fl.line(ptr); got != pl.line {
				t.Errorf("%s %s: line %d, want %d", name, ptr, got, pl.line)
			}
			if got := fl.path(ptr); got != pl.path {
				t.Errorf("%s %s: path %q, want %q", name, ptr, got, pl.path)
			}
			missing := ptr + "/no~1such"
			if fl.line(missing) != tr.line(missing) || fl.path(missing) != tr.path(missing) {
				t.Errorf("%s %s: %d %q, want %d %q", name, missing, fl.line(missing), fl.path(missing), tr.line(missing), tr.path(missing))
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d values of the example pools, want more", checked)
	}
}

// The document a tree is converted from is dropped node by node as it is
// converted, so it is not held whole beside the tree; an anchored node,
// which an alias converts again, stays whole and converts the same each
// time.
func TestTreeDropsTheDocumentAsItConverts(t *testing.T) {
	doc, p := parseYAML([]byte(`groups:
  - name: g
    template: &tmpl
      labels: {zone: a}
slots:
  - {name: s1, group: g, template: *tmpl}
  - {name: s2, group: g, template: *tmpl}
`))
	if p != nil {
		t.Fatal(p)
	}
	root := doc.Content[0]
	groups := root.Content[1].Content[0]
	tmpl := groups.Content[3]
	tr := newTree(doc)
	for i, n := range root.Content {
		if n != nil {
			t.Errorf("the root's node %d (line %d) is held after the conversion", i, n.Line)
		}
	}
	if len(tmpl.Content) != 2 || tmpl.Content[1] == nil || tmpl.Content[1].Content[1] == nil {
		t.Fatalf("the anchored template lost its content: %+v", tmpl.Content)
	}
	slots := tr.root.(map[string]any)["slots"].([]any)
	for _, s := range slots {
		labels := s.(map[string]any)["template"].(map[string]any)["labels"].(map[string]any)
		if labels["zone"] != "a" {
			t.Errorf("an alias of the template converted as %v", s)
		}
	}
}
