package pool

import (
	"strconv"
	"strings"
)

// fileLines is what a Config keeps of its file for problems found when it
// is reconciled: the line of every value, by JSON pointer, and which values
// are lists, from which a value's display path follows. It is held for as
// long as serve runs, so it keeps no display path per value: at 10,000
// slots those strings would be most of a Config.
type fileLines struct {
	lines map[string]int32
	lists map[string]struct{} // pointers of the file's lists
}

// linesOf keeps t's lines and lists; t must still hold its document.
func linesOf(t *tree) *fileLines {
	f := &fileLines{lines: make(map[string]int32, len(t.where)), lists: map[string]struct{}{}}
	for ptr, p := range t.where {
		f.lines[ptr] = int32(min(p.line, 1<<31-1))
	}
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch c := v.(type) {
		case []any:
			f.lists[ptr] = struct{}{}
			for i, x := range c {
				walk(x, ptr+"/"+strconv.Itoa(i))
			}
		case map[string]any:
			for k, x := range c {
				walk(x, ptr+"/"+escapeToken(k))
			}
		}
	}
	walk(t.root, "")
	return f
}

// line is the line of the value at ptr, or of its nearest ancestor the
// file holds (a missing field is reported at the object that lacks it).
func (f *fileLines) line(ptr string) int {
	for {
		if l, ok := f.lines[ptr]; ok {
			return int(l)
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return 0
		}
		ptr = ptr[:i]
	}
}

// path is the display path of ptr, as tree.path gives it:
// groups[0].template.labels["example.com/zone"].
func (f *fileLines) path(ptr string) string {
	if ptr == "" {
		return ""
	}
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return ""
	}
	parent, tok := ptr[:i], ptr[i+1:]
	if _, list := f.lists[parent]; list {
		if _, held := f.lines[ptr]; held { // an element, not a missing field
			return f.path(parent) + "[" + tok + "]"
		}
	}
	return joinKey(f.path(parent), unescapeToken(tok))
}
