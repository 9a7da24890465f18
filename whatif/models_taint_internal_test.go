package whatif

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/pool"
)

// A boot's readiness gate is modelled from the log: from its machine on
// (MachinePoweredOn's instant) to its claim's ClaimReady. A claim that
// fails after its machine came on, or a machine on with no boot (by hand),
// gives no sample; a slot with thin history takes its group's.
func TestModelsReadinessGateFromHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ref := func(slot, claim string) events.Ref {
		return events.Ref{Slot: slot, Group: "g", Claim: claim, Cause: "test"}
	}
	h := newHistory()
	for _, e := range []events.Event{
		{Time: at(0), Data: events.ClaimBooting{Ref: ref("a", "a1")}},
		{Time: at(6 * time.Second), Data: events.MachinePoweredOn{Ref: ref("a", "a1"), At: at(5 * time.Second)}},
		{Time: at(9 * time.Second), Data: events.ClaimReady{Ref: ref("a", "a1")}},
		{Time: at(time.Hour), Data: events.ClaimBooting{Ref: ref("a", "a2")}},
		{Time: at(time.Hour + 5*time.Second), Data: events.MachinePoweredOn{Ref: ref("a", "a2"), At: at(time.Hour + 4*time.Second)}},
		{Time: at(time.Hour + 20*time.Second), Data: events.ClaimFailed{Ref: ref("a", "a2")}},
		{Time: at(2 * time.Hour), Data: events.MachinePoweredOn{Ref: ref("a", ""), At: at(2 * time.Hour)}},
		{Time: at(2*time.Hour + time.Second), Data: events.ClaimReady{Ref: ref("a", "a3")}},
		{Time: at(3 * time.Hour), Data: events.ClaimBooting{Ref: ref("b", "b1")}},
		{Time: at(3*time.Hour + 3*time.Second), Data: events.MachinePoweredOn{Ref: ref("b", "b1"), At: at(3*time.Hour + 3*time.Second)}},
		{Time: at(3*time.Hour + 5*time.Second), Data: events.ClaimReady{Ref: ref("b", "b1")}},
		{Time: at(4 * time.Hour), Data: events.ClaimBooting{Ref: ref("b", "b2")}},
		{Time: at(4*time.Hour + 3*time.Second), Data: events.MachinePoweredOn{Ref: ref("b", "b2"), At: at(4*time.Hour + 3*time.Second)}},
		{Time: at(4*time.Hour + 6*time.Second), Data: events.ClaimReady{Ref: ref("b", "b2")}},
	} {
		h.apply(e)
	}
	if got := h.slots["a"].TaintSamples; len(got) != 1 || got[0] != 4*time.Second {
		t.Fatalf("a's readiness gates %v, want [4s] (a2 failed, the machine on by hand had no boot)", got)
	}
	ms := h.models(&pool.Config{Slots: []pool.Slot{{Name: "a", Group: "g"}, {Name: "b", Group: "g"}}}, 3)
	for _, sl := range []string{"a", "b"} {
		m := ms[sl]
		if m.FellBack != "group" || len(m.TaintSamples) != 3 {
			t.Fatalf("%s: %+v, want the group's 3 readiness gates", sl, m)
		}
		if k := m.Knobs(); len(k.TaintSamples) != 3 || k.TaintSamples[0] != 4*time.Second || k.TaintSamples[1] != 2*time.Second || k.TaintSamples[2] != 3*time.Second {
			t.Fatalf("%s: the simulator's readiness gates %v, want [4s 2s 3s]", sl, k.TaintSamples)
		}
	}
}
