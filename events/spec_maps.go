package events

import (
	"slices"
	"strings"
)

// SpecMaps holds one labels map and one capacity map per distinct set: the
// slots of a pool mostly declare the same (a group's machines alike), and
// each small map would otherwise be held once per slot. A shared map is
// never written: a slot's spec is replaced whole when it changes, and a
// reader that changes one clones it first. The zero value is not ready;
// make one with make(SpecMaps).
type SpecMaps map[string]map[string]string

// Share makes spec's labels and capacity the held maps of the same
// contents, holding spec's own the first time a set is met.
func (m SpecMaps) Share(spec *SlotSpec) {
	spec.Labels = m.share("l", spec.Labels)
	spec.Capacity = m.share("c", spec.Capacity)
}

// share is the map held for v's contents (v itself, the first time).
func (m SpecMaps) share(kind string, v map[string]string) map[string]string {
	if len(v) == 0 {
		return v
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(kind)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(v[k])
	}
	key := b.String()
	if held, ok := m[key]; ok {
		return held
	}
	m[key] = v
	return v
}
