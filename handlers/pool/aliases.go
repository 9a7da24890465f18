package pool

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// checkAliases refuses, before anything is expanded, a document whose
// aliases refer to the value that holds them (a cycle: `a: &a [*a]`) or
// expand it beyond maxNodes values (an alias bomb: a few lines whose
// aliases nest into millions of values). yaml.Node keeps an alias as a
// pointer, so the expanded size of every node is counted once and reused:
// the check costs the size of the file, not of its expansion.
func checkAliases(doc *yaml.Node) *Problem {
	a := aliasCheck{size: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
	_, p := a.expanded(doc)
	return p
}

type aliasCheck struct {
	size map[*yaml.Node]int  // expanded size of a node already counted
	open map[*yaml.Node]bool // nodes being counted: the path from the root
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
		if p == nil && s > maxNodes {
			p = tooLarge(n.Line)
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
		if total > maxNodes {
			return 0, tooLarge(c.Line)
		}
	}
	delete(a.open, n)
	a.size[n] = total
	return total, nil
}

func tooLarge(line int) *Problem {
	return &Problem{Line: line, Msg: fmt.Sprintf("document too large: its aliases expand it to more than %d values (an alias bomb?); write the values out or use fewer aliases", maxNodes)}
}
