package cost

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/internal/claimname"
)

// history is a random log of a small pool and, kept aside, each slot's
// on-intervals as its power facts say (the oracle).
type history struct {
	evs    []events.Event
	onSecs map[string]float64 // by slot, clipped to the window
}

var (
	propSince = time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC)
	propUntil = time.Date(2026, 11, 1, 20, 0, 0, 0, time.UTC)
)

func genHistory(t *rapid.T) history {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	groups := []string{"g1", "g2"}
	slots := []string{"a", "b", "c", "d"}
	groupOf := map[string]string{"a": "g1", "b": "g1", "c": "g2", "d": "g2"}
	h := history{onSecs: map[string]float64{}}
	seq := uint64(0)
	add := func(at time.Time, d events.Data) {
		seq++
		h.evs = append(h.evs, events.Event{Seq: seq, Time: at, Data: d})
	}
	price := func() *float64 { v := float64(rapid.IntRange(0, 100).Draw(t, "price")) / 10; return &v }
	spec := func() events.GroupSpec {
		return events.GroupSpec{Cost: &events.Cost{PricePerHour: price(), PowerWatts: price(), EnergyPricePerKWh: price(), Currency: "EUR"}}
	}
	for _, g := range groups {
		add(start, events.GroupDeclared{Ref: events.Ref{Group: g}, Spec: spec()})
	}
	for _, s := range slots {
		add(start, events.SlotDeclared{Ref: events.Ref{Slot: s, Group: groupOf[s]}})
	}
	on := map[string]bool{}
	lastAt := map[string]time.Time{}
	onSince := map[string]time.Time{}
	live := map[string]string{}
	clip := func(slot string, a, b time.Time) {
		if a.Before(propSince) {
			a = propSince
		}
		if b.After(propUntil) {
			b = propUntil
		}
		if a.Before(b) {
			h.onSecs[slot] += b.Sub(a).Seconds()
		}
	}
	now := start
	n := rapid.IntRange(0, 200).Draw(t, "events")
	for i := range n {
		now = now.Add(time.Duration(rapid.IntRange(0, 1800).Draw(t, "gap")) * time.Second)
		s := rapid.SampledFrom(slots).Draw(t, "slot")
		ref := events.Ref{Slot: s, Group: groupOf[s], Claim: live[s]}
		switch rapid.IntRange(0, 10).Draw(t, "action") {
		case 0:
			// Named by the rule (the index holds it in 4 bytes) or not.
			c := fmt.Sprintf("c%d", i)
			if i%2 == 0 {
				c = claimname.Of(s, uint32(i))
			}
			live[s] = c
			ref.Claim = c
			add(now, events.ClaimCreated{Ref: ref, RequestedBy: rapid.SampledFrom([]string{"ca", "alice", ""}).Draw(t, "who")})
		case 1:
			add(now, events.ClaimBooting{Ref: ref})
		case 2:
			add(now, events.ClaimReady{Ref: ref})
		case 3:
			add(now, events.ScaleDownRequested{Ref: ref})
		case 4:
			add(now, events.ShutdownFired{Ref: ref})
		case 5:
			add(now, events.ShutdownAttemptLimitReached{Ref: ref})
		case 6:
			add(now, events.UnclaimedShutdownPaused{Ref: ref, PausedUntil: now.Add(time.Duration(rapid.IntRange(0, 7200).Draw(t, "pause")) * time.Second)})
		case 7:
			if rapid.Bool().Draw(t, "failed") {
				add(now, events.ClaimFailed{Ref: ref})
			} else {
				add(now, events.ClaimCompleted{Ref: ref})
			}
			delete(live, s)
		case 8:
			add(now, events.GroupChanged{Ref: events.Ref{Group: groupOf[s]}, Spec: spec()})
		default:
			// A power fact, its instant up to 2 minutes before it is written
			// and never before the slot's last one.
			at := now.Add(-time.Duration(rapid.IntRange(0, 120).Draw(t, "lag")) * time.Second)
			if at.Before(lastAt[s]) {
				at = lastAt[s]
			}
			if at.Before(start) {
				at = start
			}
			lastAt[s] = at
			if on[s] {
				clip(s, onSince[s], at)
				add(now, events.MachinePoweredOff{Ref: ref, At: at, AtSource: events.AtObserved, Reason: events.PowerOffNotReady})
			} else {
				onSince[s] = at
				add(now, events.MachinePoweredOn{Ref: ref, At: at, AtSource: events.AtObserved})
			}
			on[s] = !on[s]
		}
	}
	for _, s := range slots {
		if on[s] {
			clip(s, onSince[s], propUntil)
		}
	}
	return h
}

// Machine-seconds summed by slot = by group = by requester (unclaimed
// included) = by claim = the slots' on-intervals: every second of an up
// machine is counted once, in exactly one row of each report.
func TestPropertyMachineSecondsAddUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t)
		var want float64
		for _, s := range h.onSecs {
			want += s
		}
		bySlot := map[string]float64{}
		for _, dim := range Dimensions {
			f := NewFold(dim, propSince, propUntil)
			for _, e := range h.evs {
				f.Apply(e)
			}
			var sum float64
			for k, s := range f.Seconds(time.Time{}) {
				sum += s
				if dim == BySlot {
					bySlot[k] = s
				}
			}
			if math.Abs(sum-want) > 1e-6 {
				t.Fatalf("by %s: %.3f machine-seconds, the on-intervals hold %.3f", dim, sum, want)
			}
		}
		for s, want := range h.onSecs {
			if math.Abs(bySlot[s]-want) > 1e-6 {
				t.Fatalf("slot %s: %.3f machine-seconds, its on-intervals hold %.3f", s, bySlot[s], want)
			}
		}
	})
}
