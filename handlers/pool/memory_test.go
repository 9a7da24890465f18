package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

// A parsed pool file is held from the start's parse until it is applied,
// beside the views being built. It holds the decoded slots, their labels
// and capacity shared as the views share them, and the lines of the few
// fields a reconcile reports at: not the parsed document the checks
// walked, nor a line or display path per value. At 10,000 slots, under
// 3 MiB.
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
	if held > 3<<20 {
		t.Errorf("a parsed pool of 10,000 slots holds %.1f MiB, want under 3 MiB", float64(held)/(1<<20))
	}
}

// A problem found when a Config is reconciled names the field at the same
// line and path as the parsed tree did, and a field the file does not set
// at its entry's line, for the example pools.
func TestReconcileProblemsAgreeWithTheTree(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{"inline.yaml": []byte(`groups:
  - name: g
    maxSize: 2
  - {name: h}
slots:
  - name: a
    group: g
    providerID: homelab://a
  - {name: b, group: h}
  -
    group:
      g
    name: c
`)}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = data
	}
	checked, unset := 0, 0
	for name, data := range inputs {
		doc, p := parseYAML(data)
		if p != nil || checkAliases(doc) != nil {
			continue // not a pool file
		}
		tr := newTree(doc)
		if root, ok := tr.root.(map[string]any); !ok || root["slots"] == nil && root["groups"] == nil {
			continue
		}
		cfg, err := Parse(name, data)
		if err != nil {
			continue // an example of a refused file
		}
		check := func(list string, i int, fields []string, problem func(i int, field, format string, args ...any) Problem) {
			for _, field := range fields {
				ptr := pointer(list, strconv.Itoa(i), field)
				got := problem(i, field, "x")
				if got.Line != tr.line(ptr) || got.Path != tr.path(ptr) {
					t.Errorf("%s %s: line %d, path %q; want %d, %q", name, ptr, got.Line, got.Path, tr.line(ptr), tr.path(ptr))
				}
				if _, set := tr.where[ptr]; !set {
					unset++
				}
				checked++
			}
		}
		for i := range cfg.Groups {
			check("groups", i, groupFieldsReported, cfg.groupProblem)
		}
		for i := range cfg.Slots {
			check("slots", i, slotFieldsReported, cfg.problem)
		}
	}
	if checked < 20 || unset == 0 || unset == checked {
		t.Fatalf("checked %d fields of the example pools (%d unset), want more of both kinds", checked, unset)
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
