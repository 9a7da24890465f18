package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// -l selects slots by their spec labels, and claims through their slot;
// --sort-by orders the items by a JSONPath over each, as kubectl's.
func TestCLIGetSelectorAndSortBy(t *testing.T) {
	f := resttest.Scripted(t)
	labelSlots(t, f, map[string]map[string]string{
		"node-1.lan": {"rack": "a", "disk": "ssd"},
		"node-2.lan": {"rack": "b", "disk": "ssd"},
		"node-3.lan": {"rack": "a", "disk": "ssd"},
	})
	var out strings.Builder
	for _, args := range [][]string{
		{"get", "slots", "-l", "rack=a"},
		{"get", "slots", "-l", "rack in (a,b),disk=ssd", "-o", "name"},
		{"get", "slots", "-l", "!rack", "-o", "name"},
		{"get", "claims", "-l", "rack=a"},
		{"get", "claims", "--selector", "rack=b", "-o", "name"},
		{"get", "claims", "-l", "rack=nowhere"},
		{"get", "slots", "--sort-by", "{.spec.providerID}", "-o", "name"},
		{"get", "claims", "--sort-by", ".requestedAt"},
		{"get", "claims", "--sort-by", "{.attempt}", "-o", "name"},
		{"get", "claims", "-l", "rack=a", "--sort-by", "{.slot}", "-o", "name"},
		{"get", "groups", "--sort-by", "{.name}", "-o", "name"},
		{"get", "claims", "--sort-by", "{.nothere}", "-o", "name"},
		{"get", "groups", "-l", "rack=a"},
		{"get", "slots", "-l", "rack in (a"},
		{"get", "slots", "-l", "rack=a", "node-1.lan"},
		{"get", "slots", "--sort-by", "{.spec"},
		{"get", "slots", "--sort-by", "{.spec}"},
	} {
		out.WriteString("$ claimstream " + strings.Join(args, " ") + "\n" + runCLI(t, f, args...))
	}
	checkGolden(t, "get-selector-sort-by", out.String())
}

// labelSlots gives slots labels, as a changed pool file does.
func labelSlots(t *testing.T, f *resttest.Fixture, byslot map[string]map[string]string) {
	t.Helper()
	var ws []events.Write
	f.H.Read(func(s *projections.State) {
		for name, l := range byslot {
			sl := s.Slots[name]
			spec := sl.Spec
			spec.Labels = l
			ws = append(ws, events.Write{Aggregate: events.SlotAggregate(name), Expected: sl.Seq, Events: []events.Event{{
				Time: f.H.Clock.Now().UTC(),
				Data: events.SlotChanged{Ref: events.Ref{Slot: name, Group: sl.Group, Cause: "test"}, Spec: spec},
			}}})
		}
	})
	res, err := f.H.Store.AppendWrites(context.Background(), ws...)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.H.Views.WaitFor(context.Background(), res.Last); err != nil {
		t.Fatal(err)
	}
}
