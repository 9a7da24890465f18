package pool

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// tree is a YAML document turned into JSON-compatible data (map[string]any,
// []any, string, json.Number, bool, nil) with, for every value, the line it
// was written on and the path an operator reads. Values are addressed by
// JSON pointer, the way a JSON Schema validator names instance locations.
type tree struct {
	root  any
	where map[string]place // JSON pointer -> place
	// problems found while converting (duplicate keys, bad tags).
	problems []Problem
	nodes    int
	// anchored counts the anchored nodes being converted around the
	// current one: an alias may convert them again, so their document
	// stays whole. Elsewhere a node is dropped from its parent once
	// converted, so the document does not stay whole beside the tree.
	anchored int
}

type place struct {
	line int
	path string // groups[0].template.labels["example.com/zone"]
}

// maxNodes bounds the values a document may hold once its aliases are
// expanded: room for 10,000 slots with pod specs of their own, and a bound
// on the memory any file can take. checkAliases also bounds what aliases
// may add to a small file (billion laughs).
const maxNodes = 1 << 21

// maxDepth bounds nesting (and alias chains).
const maxDepth = 100

// newTree converts the document node of a parsed file.
func newTree(doc *yaml.Node) *tree {
	t := &tree{where: map[string]place{}}
	n := doc
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			t.where[""] = place{line: max(n.Line, 1)}
			return t
		}
		n = n.Content[0]
	}
	t.where[""] = place{line: max(n.Line, 1)}
	t.root = t.convert(n, "", "", 0)
	return t
}

// line is the line of the value at ptr, or of its nearest ancestor the
// file holds (a missing field is reported at the object that lacks it).
func (t *tree) line(ptr string) int {
	for {
		if p, ok := t.where[ptr]; ok {
			return p.line
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return 0
		}
		ptr = ptr[:i]
	}
}

// path is the display path of ptr. A pointer the file does not hold (a
// missing field) is displayed from its nearest known ancestor.
func (t *tree) path(ptr string) string {
	if p, ok := t.where[ptr]; ok {
		return p.path
	}
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return ""
	}
	return joinKey(t.path(ptr[:i]), unescapeToken(ptr[i+1:]))
}

// get returns the value at ptr.
func (t *tree) get(ptr string) (any, bool) {
	v := t.root
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = unescapeToken(tok)
		switch c := v.(type) {
		case map[string]any:
			x, ok := c[tok]
			if !ok {
				return nil, false
			}
			v = x
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func (t *tree) fail(line int, path, format string, args ...any) {
	t.problems = append(t.problems, Problem{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// enter counts n while it is converted when it is anchored; the returned
// func ends that.
func (t *tree) enter(n *yaml.Node) func() {
	if n.Anchor == "" {
		return func() {}
	}
	t.anchored++
	return func() { t.anchored-- }
}

func (t *tree) convert(n *yaml.Node, ptr, path string, depth int) any {
	t.nodes++
	defer t.enter(n)()
	if depth > maxDepth {
		t.fail(n.Line, path, "nested too deeply")
		return nil
	}
	if t.nodes > maxNodes {
		if t.nodes == maxNodes+1 {
			t.fail(n.Line, path, "document too large (more than %d values)", maxNodes)
		}
		return nil
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			t.fail(n.Line, path, "unknown alias %q", n.Value)
			return nil
		}
		return t.convert(n.Alias, ptr, path, depth+1)
	case yaml.MappingNode:
		m := map[string]any{}
		t.mapping(n, m, map[string]int{}, ptr, path, depth)
		return m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			iptr := ptr + "/" + strconv.Itoa(i)
			ipath := path + "[" + strconv.Itoa(i) + "]"
			t.where[iptr] = place{line: item.Line, path: ipath}
			s = append(s, t.convert(item, iptr, ipath, depth+1))
			if t.anchored == 0 {
				n.Content[i] = nil
			}
		}
		return s
	case yaml.ScalarNode:
		return t.scalar(n, path)
	case yaml.DocumentNode:
		t.fail(n.Line, path, "unexpected document")
	}
	return nil
}

// mapping fills m from the mapping node n. seen holds the keys already
// set explicitly (with their lines); merged keys (<<) never override them.
func (t *tree) mapping(n *yaml.Node, m map[string]any, seen map[string]int, ptr, path string, depth int) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			t.fail(k.Line, path, "a mapping key must be a plain string")
			continue
		}
		key := k.Value
		kptr := ptr + "/" + escapeToken(key)
		kpath := joinKey(path, key)
		if first, dup := seen[key]; dup {
			t.fail(k.Line, kpath, "duplicate key (first set at line %d)", first)
			continue
		}
		seen[key] = k.Line
		t.where[kptr] = place{line: k.Line, path: kpath}
		val := t.convert(v, kptr, kpath, depth+1)
		if t.anchored == 0 {
			n.Content[i], n.Content[i+1] = nil, nil
		}
		if val == nil && (v.Kind == yaml.ScalarNode || v.Kind == yaml.AliasNode) {
			// "key:" or "key: null" reads as absent, as in Kubernetes
			// manifests; the line stays known for errors about it.
			continue
		}
		m[key] = val
	}
	// Merge keys: the first source wins among merged mappings, and any
	// explicit key wins over all of them.
	for _, src := range merges {
		for _, mn := range mergeSources(src) {
			if mn.Kind != yaml.MappingNode {
				t.fail(src.Line, path, "a merge (<<) must name a mapping or a list of mappings")
				continue
			}
			inner := map[string]any{}
			explicit := map[string]int{}
			for k, line := range seen {
				explicit[k] = line
			}
			t.mergeInto(mn, inner, explicit, ptr, path, depth+1)
			for k, v := range inner {
				if _, ok := m[k]; !ok {
					m[k] = v
					seen[k] = t.where[ptr+"/"+escapeToken(k)].line
				}
			}
		}
	}
}

// mergeInto converts a merged mapping, skipping the keys already set.
func (t *tree) mergeInto(n *yaml.Node, m map[string]any, skip map[string]int, ptr, path string, depth int) {
	if depth > maxDepth {
		t.fail(n.Line, path, "nested too deeply")
		return
	}
	defer t.enter(n)()
	sub := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && k.ShortTag() != "!!merge" {
			if _, ok := skip[k.Value]; ok {
				continue
			}
		}
		sub.Content = append(sub.Content, n.Content[i], n.Content[i+1])
	}
	t.mapping(sub, m, map[string]int{}, ptr, path, depth)
}

func mergeSources(n *yaml.Node) []*yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.SequenceNode {
		return []*yaml.Node{n}
	}
	var out []*yaml.Node
	for _, c := range n.Content {
		for c.Kind == yaml.AliasNode && c.Alias != nil {
			c = c.Alias
		}
		out = append(out, c)
	}
	return out
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

func (t *tree) scalar(n *yaml.Node, path string) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			t.fail(n.Line, path, "%v", err)
			return nil
		}
		return b
	case "!!int":
		if jsonNumber.MatchString(n.Value) {
			return json.Number(n.Value)
		}
		var i int64
		if err := n.Decode(&i); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			return json.Number(strconv.FormatUint(u, 10))
		}
		t.fail(n.Line, path, "integer %s is out of range", n.Value)
		return nil
	case "!!float":
		if jsonNumber.MatchString(n.Value) {
			return json.Number(n.Value)
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			t.fail(n.Line, path, "%v", err)
			return nil
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			t.fail(n.Line, path, "must be a finite number (got %s)", n.Value)
			return nil
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	case "!!str", "!!timestamp", "!!binary":
		// Timestamps and binary stay the text the operator wrote.
		return n.Value
	default:
		t.fail(n.Line, path, "unsupported YAML tag %s", n.Tag)
		return nil
	}
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// joinKey appends a mapping key to a display path: .key for identifiers,
// ["key"] for anything else (label keys with dots and slashes).
func joinKey(path, key string) string {
	if identifier.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// pointer builds a JSON pointer from raw tokens.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(tok))
	}
	return b.String()
}
