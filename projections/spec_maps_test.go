package projections_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

func samePtr(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// Slots that declare the same labels or capacity share one map in the
// views, whether folded or decoded from a snapshot; a slot whose spec
// changes gets its own without touching the others'.
func TestSlotsOfTheSameSpecShareItsMaps(t *testing.T) {
	s := projections.NewState()
	datas := []events.Data{events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "pool"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}}}
	for i := range 6 {
		// Each slot's maps are its own in the events, as decoded ones are.
		datas = append(datas, events.SlotDeclared{Ref: events.Ref{Slot: fmt.Sprintf("s%d", i), Group: "g", Cause: "pool"}, Spec: events.SlotSpec{
			Labels:   map[string]string{"rack": fmt.Sprint(i % 2), "zone": "a"},
			Capacity: map[string]string{"cpu": "8", "memory": "32Gi"},
		}})
	}
	foldAll(t, s, datas...)
	check := func(s *projections.State, when string) {
		t.Helper()
		for i := range 6 {
			sl, first := s.Slots[fmt.Sprintf("s%d", i)], s.Slots[fmt.Sprintf("s%d", i%2)]
			if !samePtr(sl.Spec.Labels, first.Spec.Labels) || !samePtr(sl.Spec.Capacity, s.Slots["s0"].Spec.Capacity) {
				t.Fatalf("%s: s%d does not share the maps of the slots with its labels and capacity", when, i)
			}
			if want := fmt.Sprint(i % 2); sl.Spec.Labels["rack"] != want {
				t.Fatalf("%s: s%d's rack is %q, want %q", when, i, sl.Spec.Labels["rack"], want)
			}
		}
		if samePtr(s.Slots["s0"].Spec.Labels, s.Slots["s1"].Spec.Labels) {
			t.Fatalf("%s: slots of other labels share a map", when)
		}
	}
	check(s, "folded")

	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	decoded := projections.NewState()
	if err := json.Unmarshal(b, decoded); err != nil {
		t.Fatal(err)
	}
	decoded.Reindex()
	check(decoded, "decoded")

	// A change of one slot's labels leaves the others' as they were.
	foldAll(t, s, events.SlotChanged{Ref: events.Ref{Slot: "s2", Group: "g", Cause: "pool"}, Spec: events.SlotSpec{
		Labels: map[string]string{"rack": "9", "zone": "a"}, Capacity: map[string]string{"cpu": "8", "memory": "32Gi"},
	}})
	if got := s.Slots["s4"].Spec.Labels["rack"]; got != "0" {
		t.Fatalf("s4's rack is %q after s2 changed, want 0", got)
	}
	if got := s.Slots["s2"].Spec.Labels["rack"]; got != "9" {
		t.Fatalf("s2's rack is %q, want 9", got)
	}
	if !samePtr(s.Slots["s2"].Spec.Capacity, s.Slots["s0"].Spec.Capacity) {
		t.Fatal("s2's unchanged capacity is no longer shared")
	}
}
