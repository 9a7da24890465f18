// Package timelinetest spells timelines out for tests to compare.
package timelinetest

import (
	"fmt"
	"strings"

	"github.com/claimstream/claimstream/projections/timeline"
)

// Canonical spells a timeline out (names, not table indexes) to compare two.
func Canonical(tl timeline.Timeline) string {
	var b strings.Builder
	fmt.Fprintf(&b, "slots %v groups %v events %d\n", tl.Slots, tl.SlotGroups, tl.Events)
	claim := func(i int64) string {
		if i < 0 {
			return "-"
		}
		return tl.Claims[i]
	}
	for k := 0; k < len(tl.Bars); k += 5 {
		fmt.Fprintf(&b, "bar %s %d-%d %s %s\n", tl.Slots[tl.Bars[k]], tl.Bars[k+1], tl.Bars[k+2], tl.Phases[tl.Bars[k+3]], claim(tl.Bars[k+4]))
	}
	for k := 0; k < len(tl.Failures); k += 4 {
		fmt.Fprintf(&b, "fail %s %d %s %s\n", tl.Slots[tl.Failures[k]], tl.Failures[k+1], claim(tl.Failures[k+2]), tl.Reasons[tl.Failures[k+3]])
	}
	return b.String()
}
