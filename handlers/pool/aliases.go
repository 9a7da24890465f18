package pool

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// minAliasBudget is how many values aliases may add to any file, however
// small; a larger file may grow by aliasGrowth times its own size (a pool
// of 10,000 slots that shares one pod spec by alias adds about five values
// per value written). Past that a document is an alias bomb: a few lines
// that nest into millions of values.
const (
	minAliasBudget = 1 << 18
	aliasGrowth    = 8
)

// checkAliases refuses, before anything is expanded, a document larger
// than maxNodes values, one whose aliases refer to the value that holds
// them (a cycle: `a: &a [*a]`), and one whose aliases expand it past its
// alias budget. yaml.Node keeps an alias as a pointer, so the expanded
// size of every node is counted once and reused: the check costs the size
// of the file, not of its expansion.
func checkAliases(doc *yaml.Node) *Problem {
	written, line := writtenValues(doc, 0)
	if written > maxNodes {
		return &Problem{Line: line, Msg: fmt.Sprintf("document too large: more than %d values (a pool file may hold at most %d)", maxNodes, maxNodes)}
	}
	limit := min(maxNodes, written+max(minAliasBudget, aliasGrowth*written))
	a := aliasCheck{limit: limit, size: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
	_, p := a.expanded(doc)
	return p
}

// writtenValues counts the values of the document as written, an alias
// counting one, and stops past maxNodes with the line it stopped at.
func writtenValues(n *yaml.Node, count int) (int, int) {
	if n == nil {
		return count, 0
	}
	count++
	if count > maxNodes {
		return count, n.Line
	}
	if n.Kind == yaml.AliasNode {
		return count, 0
	}
	for _, c := range n.Content {
		var line int
		if count, line = writtenValues(c, count); count > maxNodes {
			return count, line
		}
	}
	return count, 0
}

type aliasCheck struct {
	limit int                 // values the expanded document may hold
	size  map[*yaml.Node]int  // expanded size of a node already counted
	open  map[*yaml.Node]bool // nodes being counted: the path from the root
}

// expanded is the number of values n stands for once its aliases are
// replaced by what they name.
func (a *aliasCheck) expanded(n *yaml.Node) (int, *Problem) {
	if n == nil {
		return 0, nil
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 1, nil // an unknown anchor is reported by the parser
		}
		if a.open[n.Alias] {
			return 0, &Problem{Line: n.Line, Msg: "YAML alias *" + n.Value + " refers to the value that contains it (a cycle); aliases must name a value defined before and outside them"}
		}
		s, p := a.expanded(n.Alias)
		if p == nil && s > a.limit {
			p = a.tooLarge(n.Line)
		}
		return s, p
	}
	if s, ok := a.size[n]; ok {
		return s, nil
	}
	a.open[n] = true
	total := 1
	for _, c := range n.Content {
		s, p := a.expanded(c)
		if p != nil {
			return 0, p
		}
		total += s
		if total > a.limit {
			return 0, a.tooLarge(c.Line)
		}
	}
	delete(a.open, n)
	a.size[n] = total
	return total, nil
}

func (a *aliasCheck) tooLarge(line int) *Problem {
	return &Problem{Line: line, Msg: fmt.Sprintf("document too large: its aliases expand it to more than %d values (an alias bomb?); write the values out or use fewer aliases", a.limit)}
}
