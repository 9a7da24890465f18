package projections

import (
	"slices"
	"strings"

	"github.com/claimstream/claimstream/events"
)

// The slots of a pool mostly declare the same labels and capacity (a group's
// machines alike), so the views hold one map per distinct set, shared by
// every slot that declares it, instead of one each, which would hold two
// small maps per slot and decode them again from every snapshot. A shared map
// is never written: a slot's spec is replaced whole when it changes, and a
// reader that changes one clones it first (provider/template.go).
type specMaps map[string]map[string]string

// shareSpecMaps makes spec's labels and capacity the views' shared maps of
// the same contents.
func (s *State) shareSpecMaps(spec *events.SlotSpec) {
	if s.index.specMaps == nil {
		s.index.specMaps = specMaps{}
	}
	spec.Labels = s.index.specMaps.share("l", spec.Labels)
	spec.Capacity = s.index.specMaps.share("c", spec.Capacity)
}

// share is the map held for v's contents (v itself, the first time).
func (m specMaps) share(kind string, v map[string]string) map[string]string {
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
