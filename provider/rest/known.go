package rest

import (
	"strings"

	"github.com/claimstream/claimstream/projections"
)

// Known reports whether the views know a named object, for the
// dashboard's pages (dashboard.Options.Known): kind "slot" is a slot of
// the views; kind "claim" is a live claim, or a name one of the views'
// slots could have given a claim, since a collected claim's story stays
// in the log.
func Known(views *projections.Runner) func(kind, name string) bool {
	return func(kind, name string) bool {
		var ok bool
		views.Read(func(st *projections.State) {
			switch kind {
			case "slot":
				ok = st.Slots[name] != nil
			case "claim":
				ok = len(claimSlots(st, name)) > 0
			}
		})
		return ok
	}
}

// claimSlots are the slots a claim may belong to: its own while it is
// live, else every slot whose claim names the name fits (a slot's name,
// cut to 40 characters, a dash and six characters).
func claimSlots(st *projections.State, claim string) []string {
	if c := st.Claims[claim]; c != nil {
		return []string{c.Slot}
	}
	var out []string
	for name := range st.Slots {
		base := name
		if len(base) > 40 {
			base = strings.TrimRight(base[:40], ".-")
		}
		if len(claim) == len(base)+7 && strings.HasPrefix(claim, base+"-") {
			out = append(out, name)
		}
	}
	return out
}
