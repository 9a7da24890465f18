package pool

import (
	"slices"
	"strconv"
)

// The fields of an entry that a reconcile reports problems at
// (reconcile.go). A Config keeps their lines and no other of its file's:
// the parsed tree and its document, large at 10,000 slots, are for the
// checks and the decode only, and a line per value would be most of what
// a Config holds.
var (
	groupFieldsReported = []string{"maxSize"}
	slotFieldsReported  = []string{"group", "providerID"}
)

// entryLines places an entry of a Config in its file, for a problem found
// when the Config is reconciled.
type entryLines struct {
	// entry is the entry's index in its list in the file, plus one; 0 when
	// the Config is not from a file.
	entry int32
	// fields are the lines of the list's reported fields, in their order;
	// 0 for a field the entry does not set.
	fields [2]int32
}

// entryLinesOf places the i-th entry of list in t.
func entryLinesOf(t *tree, list string, i int, reported []string) entryLines {
	ptr := pointer(list, strconv.Itoa(i))
	e := entryLines{entry: int32(min(i+1, 1<<31-1))}
	for k, f := range reported {
		if w, ok := t.where[ptr+"/"+escapeToken(f)]; ok {
			e.fields[k] = int32(min(w.line, 1<<31-1))
		}
	}
	return e
}

// problem is a Problem about field of the i-th entry of the Config's list
// (the entry starting at line): at the field's line and path in the file
// when the Config came from one, at the entry's line when the file does
// not set the field.
func (e entryLines) problem(list string, i, line int, reported []string, field, msg string) Problem {
	p := Problem{Line: line, Path: list + "[" + strconv.Itoa(i) + "]." + field, Msg: msg}
	if e.entry == 0 {
		return p
	}
	p.Path = joinKey(list+"["+strconv.Itoa(int(e.entry-1))+"]", field)
	if k := slices.Index(reported, field); k >= 0 && e.fields[k] > 0 {
		p.Line = int(e.fields[k])
	}
	return p
}
