// Package decidetest holds what the tests of the deciders and of the
// service over them share: the invariants every decision keeps, and a
// line diff of two transcripts or dumps of the views.
package decidetest

import (
	"fmt"
	"strings"

	"github.com/claimstream/claimstream/projections"
)

// CheckInvariants asserts the invariants (docs/design.md) 1 and 2 on the views,
// counting from the claims' raw fields rather than through the queries it
// checks.
func CheckInvariants(s *projections.State) error {
	live := map[string]int{}
	wanting := map[string]int{}
	for _, c := range s.Claims {
		switch c.Phase {
		case projections.PhaseNone, projections.PhasePending, projections.PhaseBooting, projections.PhaseReady:
			live[c.Slot]++
			if c.ScaleDown == nil {
				wanting[s.Slots[c.Slot].Group]++
			}
		}
	}
	for slot, n := range live {
		if n > 1 {
			return fmt.Errorf("invariant 1: slot %s has %d live claims", slot, n)
		}
	}
	for name, g := range s.Groups {
		if g.Retired {
			continue
		}
		if t := s.TargetSize(name); t != wanting[name] {
			return fmt.Errorf("invariant 2: group %s target %d, %d claims want a machine", name, t, wanting[name])
		}
		declared := 0
		for _, sl := range s.Slots {
			if sl.Group == name && !sl.Retired && sl.Decommissioned == nil {
				declared++
			}
		}
		maxSize := declared
		if g.Spec.MaxSize > 0 && g.Spec.MaxSize < declared {
			maxSize = g.Spec.MaxSize
		}
		if s.MaxSize(name) != maxSize {
			return fmt.Errorf("group %s reports maxSize %d, want %d", name, s.MaxSize(name), maxSize)
		}
		if wanting[name] > maxSize {
			return fmt.Errorf("invariant 2: group %s target %d above maxSize %d", name, wanting[name], maxSize)
		}
	}
	return nil
}

// Diff lists the lines where got differs from want.
func Diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
