package handlers

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// A slot's view carries of its terminal claims only what the collector
// reads (name, end, TTL), not a copy of each whole claim: a slot of a busy
// pool holds dozens until their TTL passes, and a replayed week builds its
// views millions of times.
func TestASlotViewCopiesOnlyWhatTheCollectorReadsOfTerminalClaims(t *testing.T) {
	s := projections.NewState()
	s.Groups["g"] = &projections.Group{Name: "g"}
	sl := &projections.Slot{Name: "a", Group: "g"}
	s.Slots["a"] = sl
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		end := at.Add(time.Duration(i) * time.Minute)
		c := &projections.Claim{Name: fmt.Sprintf("c-%d", i), Slot: "a", Group: "g", Phase: projections.PhaseCompleted,
			RequestedAt: at, RequestedBy: "cluster-autoscaler", FinishedAt: &end, TTL: events.Duration(time.Hour),
			Reason: "released", Message: "released by cluster-autoscaler's DeleteNodes", StartupJob: fmt.Sprintf("c-%d-start-1", i)}
		s.Claims[c.Name] = c
		sl.Claims = append(sl.Claims, c.Name)
	}
	v := buildView(s, "a")
	if len(v.Terminal) != 40 || v.Terminal[3].Name != "c-3" || v.Terminal[3].TTL.D() != time.Hour {
		t.Fatalf("terminal claims of the view: %+v", v.Terminal[:min(len(v.Terminal), 4)])
	}
	const builds = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range builds {
		v = buildView(s, "a")
	}
	runtime.ReadMemStats(&after)
	perView := (after.TotalAlloc - before.TotalAlloc) / builds
	t.Logf("%d bytes a view of a slot with 40 terminal claims", perView)
	// 40 small records and the slot's own copies; a whole claim each
	// is over 20 KB.
	if perView > 4<<10 {
		t.Fatalf("a view of a slot with 40 terminal claims allocates %d bytes, want at most %d", perView, 4<<10)
	}
}
