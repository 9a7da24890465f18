package whatif

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/pool"
)

// A slot's model from its history: boot and shutdown durations; a boot that
// failed by a timeout but whose machine came on after all is a slow boot
// (its duration a sample, no chance failure), one whose machine never came
// on a failure; thin histories fall back to the group, then the defaults.
func TestModelsFromHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ref := func(slot, claim string) events.Ref {
		return events.Ref{Slot: slot, Group: "g", Claim: claim, Cause: "test"}
	}
	h := newHistory()
	for _, e := range []events.Event{
		{Time: at(0), Data: events.ClaimBooting{Ref: ref("a", "a1")}},
		{Time: at(2 * time.Minute), Data: events.MachinePoweredOn{Ref: ref("a", "a1"), At: at(90 * time.Second)}},
		{Time: at(time.Hour), Data: events.ShutdownFired{Ref: ref("a", "a1")}},
		{Time: at(time.Hour + time.Minute), Data: events.MachinePoweredOff{Ref: ref("a", "a1"), At: at(time.Hour + 40*time.Second)}},
		{Time: at(2 * time.Hour), Data: events.ClaimBooting{Ref: ref("a", "a2")}},
		{Time: at(2*time.Hour + 10*time.Minute), Data: events.ClaimFailed{Ref: ref("a", "a2")}},
		{Time: at(2*time.Hour + 11*time.Minute), Data: events.MachinePoweredOn{Ref: ref("a", ""), At: at(2*time.Hour + 11*time.Minute)}},
		{Time: at(3 * time.Hour), Data: events.ClaimBooting{Ref: ref("a", "a3")}},
		{Time: at(3*time.Hour + 10*time.Minute), Data: events.ClaimFailed{Ref: ref("a", "a3")}},
		{Time: at(4 * time.Hour), Data: events.ClaimBooting{Ref: ref("a", "a4")}},
		{Time: at(4*time.Hour + 2*time.Minute), Data: events.MachinePoweredOn{Ref: ref("a", "a4"), At: at(4*time.Hour + 80*time.Second)}},
	} {
		h.apply(e)
	}
	cfg := &pool.Config{Slots: []pool.Slot{{Name: "a", Group: "g"}, {Name: "b", Group: "g"}, {Name: "c", Group: "other"}}}
	ms := h.models(cfg, 3)
	a := ms["a"]
	if a.FellBack != "" || a.Boots != 4 || a.FailedBoots != 2 || a.SlowBoots != 1 {
		t.Fatalf("a: %+v", a)
	}
	if want := []time.Duration{90 * time.Second, 11 * time.Minute, 80 * time.Second}; len(a.BootSamples) != 3 || a.BootSamples[0] != want[0] || a.BootSamples[1] != want[1] || a.BootSamples[2] != want[2] {
		t.Fatalf("a's boot samples %v, want %v", a.BootSamples, want)
	}
	if len(a.ShutdownSamples) != 1 || a.ShutdownSamples[0] != 40*time.Second {
		t.Fatalf("a's shutdown samples %v", a.ShutdownSamples)
	}
	if r := a.FailureRate(); r != 0.25 {
		t.Fatalf("a's failure rate %v, want 1 of 4 (the slow boot is no chance failure)", r)
	}
	if b := ms["b"]; b.FellBack != "group" || len(b.BootSamples) != 3 {
		t.Fatalf("b (no history, group has 3 samples): %+v", b)
	}
	if c := ms["c"]; c.FellBack != "defaults" || c.Knobs().FailureRate != nil || len(c.Knobs().BootSamples) != 0 {
		t.Fatalf("c (no history in its group): %+v", c)
	}
	if got := ms.FellBack(); len(got) != 2 || got[0] != "b (group)" || got[1] != "c (defaults)" {
		t.Fatalf("fell back: %v", got)
	}
}
