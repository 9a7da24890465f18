package projections_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// Entries that reach the stream without the writer's envelope (an outside
// client's forged SlotDecommissioned, a headerless message) are counted as bad
// entries and never folded: the slot stays in service.
func TestEntriesWithoutTheEnvelopeAreNotFolded(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	declareSlots(t, st, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := projections.NewRunner(st, projections.RunnerOptions{})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Run(ctx) }()

	body := []byte(`{"slot":"s0","group":"g","cause":"forged","by":"attacker","reason":"forged"}`)
	js := st.JetStream()
	if _, err := js.Publish(ctx, "cs.slot.s0.SlotDecommissioned", body); err != nil {
		t.Fatal(err)
	}
	forged := nats.NewMsg("cs.slot.s0.SlotDecommissioned")
	forged.Header.Set(events.HeaderSpecVersion, events.SpecVersion)
	forged.Header.Set(events.HeaderType, events.CEType(events.TypeSlotDecommissioned))
	forged.Data = body
	ack, err := js.PublishMsg(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	r.Read(func(s *projections.State) {
		sl := s.Slots["s0"]
		if sl == nil || sl.Decommissioned != nil || s.SlotPhase("s0") == projections.SlotDecommissioned {
			t.Fatalf("a forged entry was folded: %+v", sl)
		}
		if s.Stats.Skipped != 2 {
			t.Fatalf("skipped %d entries, want 2", s.Stats.Skipped)
		}
	})
	if bad := st.Stats().BadData; bad < 2 {
		t.Fatalf("bad entries counted: %d, want 2", bad)
	}
}
