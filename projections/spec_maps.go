package projections

import "github.com/claimstream/claimstream/events"

// shareSpecMaps makes spec's labels and capacity the views' shared maps of
// the same contents (events.SpecMaps): the views hold one map per distinct
// set instead of two small maps per slot. A reader of the views that
// changes one clones it first (provider/template.go).
func (s *State) shareSpecMaps(spec *events.SlotSpec) {
	if s.index.specMaps == nil {
		s.index.specMaps = events.SpecMaps{}
	}
	s.index.specMaps.Share(spec)
}
