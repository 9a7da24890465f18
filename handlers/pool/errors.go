package pool

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a pool file: where (line and field path)
// and what.
type Problem struct {
	// Line is the 1-based line of the file the problem is at; 0 when no
	// line applies (a Config not read from a file).
	Line int
	// Path names the field the way an operator reads it:
	// groups[0].minSize, slots[2].startup.podSpec.containers[0].image,
	// template.labels["example.com/zone"]. Empty for the whole file.
	Path string
	Msg  string
}

// String is the problem without the file name: "12: groups[0].minSize: ...".
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ConfigError is every problem found in a pool file (or in applying it),
// sorted by line. Nothing was changed because of it.
type ConfigError struct {
	// Source is the file's name as given to Load or Parse.
	Source   string
	Problems []Problem
}

// MaxShownProblems bounds the problems Error prints: past a few dozen, a
// file is wrong in one way many times over, and the rest is noise.
const MaxShownProblems = 50

// Error prints one problem per line, at most MaxShownProblems of them, then
// how many more there are:
//
//	pool.yaml:12: groups[0].minSize: must be >= 0 (got -1)
func (e *ConfigError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if i == MaxShownProblems {
			fmt.Fprintf(&b, "%s: and %d more problems not shown", e.Source, len(e.Problems)-i)
			break
		}
		b.WriteString(e.Source)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
		if p.Path != "" {
			b.WriteString(p.Path)
			b.WriteString(": ")
		}
		b.WriteString(p.Msg)
	}
	return b.String()
}

// sortProblems orders problems by line, then path, then message, and drops
// exact duplicates.
func sortProblems(ps []Problem) []Problem {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Msg, b.Msg))
	})
	return slices.Compact(ps)
}

// poolFields are the top-level fields of a pool file.
var poolFields = []string{"groups", "slots"}

// notAPoolFile refuses a document that is not a pool file at all (a
// scalar, a list, a map with neither groups nor slots) by its kind alone.
// Its content is never echoed: --config pointed at the wrong file (the API
// token, a kubeconfig) must not print a secret. A document that is a pool
// file, however wrong, gets nil, and its problems show its values.
func notAPoolFile(doc *yaml.Node) *Problem {
	if doc == nil || len(doc.Content) == 0 {
		return nil // empty: "groups: is required"
	}
	root := doc.Content[0]
	const tail = ", not a pool file (a pool file is a map with groups and slots)"
	switch root.Kind {
	case yaml.MappingNode:
		for i := 0; i < len(root.Content); i += 2 {
			if k := root.Content[i]; k.Kind == yaml.ScalarNode && slices.Contains(poolFields, k.Value) {
				return nil
			}
		}
		if len(root.Content) == 0 {
			return nil // {}: "groups: is required"
		}
		return &Problem{Line: root.Line, Msg: "the file is a map with neither groups nor slots" + tail}
	case yaml.SequenceNode:
		return &Problem{Line: root.Line, Msg: "the file is a list" + tail}
	case yaml.ScalarNode:
		if root.ShortTag() == "!!null" {
			return nil
		}
		return &Problem{Line: root.Line, Msg: "the file is a single scalar" + tail}
	}
	return &Problem{Line: root.Line, Msg: "the file is not a map" + tail}
}
