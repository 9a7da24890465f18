package projections

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/claimstream/claimstream/events"
)

// sharedViews folds n slots of one group with a claim each, every event
// carrying its own copy of each string (as events decoded from the log
// do); causes, when set, gives each slot's claim a cause of its own.
func sharedViews(t *testing.T, n int, causes bool) *State {
	t.Helper()
	st := NewState()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	fold := func(d events.Data) {
		seq++
		if err := Evolve(st, events.Event{Seq: seq, Time: at, Data: d, Type: d.EventType(), Aggregate: events.AggregateOf(d)}); err != nil {
			t.Fatal(err)
		}
	}
	own := strings.Clone
	fold(events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}})
	for s := range n {
		slot := fmt.Sprintf("node-%d.lan", s)
		fold(events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: own("g"), Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + slot}})
		cause := own("IncreaseSize(+1) by cluster-autoscaler")
		if causes {
			cause = fmt.Sprintf("cause %d", s)
		}
		r := events.Ref{Claim: slot + "-000001", Slot: slot, Group: own("g"), Attempt: 1, Cause: cause}
		fold(events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: own(events.ScalerClusterAutoscaler),
			Request:    events.Request{Call: own(events.CallIncreaseSize), Delta: 1, Group: own("g")},
			DeadlineAt: at.Add(DefaultBudget), Budget: events.Duration(DefaultBudget), TTL: events.Duration(time.Hour)})
		st.Slots[slot].LastShutdown = &Shutdown{At: at, Job: slot + "-stop-1", Claim: own(r.Claim), Cause: own(cause)}
	}
	return st
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// checkShared fails unless every slot of st points at one copy of each
// string the slots repeat.
func checkShared(t *testing.T, how string, st *State, shutdowns bool) {
	t.Helper()
	var first *Slot
	for name, sl := range st.Slots {
		if !same(sl.Name, name) {
			t.Fatalf("%s: slot %s holds its name apart from its key", how, name)
		}
		d := sl.LastClaim
		if first == nil {
			first = sl
			continue
		}
		f := first.LastClaim
		for field, pair := range map[string][2]string{
			"group": {sl.Group, first.Group}, "digest's group": {d.Group, f.Group}, "call": {d.Call, f.Call},
			"requester": {d.RequestedBy, f.RequestedBy}, "phase": {string(d.Phase), string(f.Phase)},
		} {
			if !same(pair[0], pair[1]) {
				t.Fatalf("%s: slot %s holds its own copy of its %s %q", how, name, field, pair[0])
			}
		}
		if shutdowns && (!same(sl.LastShutdown.Cause, first.LastShutdown.Cause) || !same(sl.LastShutdown.Claim, d.Claim)) {
			t.Fatalf("%s: slot %s's last shutdown holds its own cause or claim", how, name)
		}
	}
}

// The views hold one copy of what slots repeat, as they fold events and
// as a snapshot is decoded.
func TestSlotsShareTheStringsTheyRepeat(t *testing.T) {
	st := sharedViews(t, 200, false)
	checkShared(t, "folded", st, false)
	loaded := reloaded(t, st)
	checkShared(t, "decoded", loaded, true)
	if a, b := mustViewsJSON(t, st), mustViewsJSON(t, loaded); a != b {
		t.Fatal("the decoded views differ from the folded ones")
	}
}

// Strings past the table's bound are kept as they came: no input grows
// it without end.
func TestTheSharedStringsAreBounded(t *testing.T) {
	st := sharedViews(t, maxSharedStrings+200, true)
	loaded := reloaded(t, st)
	for how, s := range map[string]*State{"folded": st, "decoded": loaded} {
		if n := len(s.index.shared); n > maxSharedStrings {
			t.Fatalf("%s: %d shared strings, bound %d", how, n, maxSharedStrings)
		}
	}
	if a, b := mustViewsJSON(t, st), mustViewsJSON(t, loaded); a != b {
		t.Fatal("the decoded views differ from the folded ones")
	}
}

func mustViewsJSON(t *testing.T, st *State) string {
	t.Helper()
	b, err := viewsJSON(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// reloaded is st stored in a snapshot and decoded again.
func reloaded(t *testing.T, st *State) *State {
	t.Helper()
	stored, _, err := encodeSnapshot(st)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := DecodeSnapshot(stored)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}
