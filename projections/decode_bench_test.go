package projections

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
)

// BenchmarkDecodeSnapshot reads the views of 10,000 slots with a claim
// each from their stored form: decoded as they are expanded, as a start
// reads them (stored), and expanded whole and then decoded in one pass;
// and from their JSON held whole, by the whole-envelope reader.
func BenchmarkDecodeSnapshot(b *testing.B) {
	st := NewState()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	fold := func(d events.Data) {
		seq++
		_ = Evolve(st, events.Event{Seq: seq, Time: at, Data: d, Type: d.EventType(), Aggregate: events.AggregateOf(d)})
	}
	fold(events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "bench"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}})
	for s := 0; s < 10_000; s++ {
		slot := fmt.Sprintf("node-%d.lan", s)
		fold(events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: "g", Cause: "bench"}, Spec: events.SlotSpec{ProviderID: "homelab://" + slot}})
		r := events.Ref{Claim: slot + "-000001", Slot: slot, Group: "g", Attempt: 1, Cause: "bench"}
		fold(events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: "bench", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"}, DeadlineAt: at.Add(DefaultBudget), Budget: events.Duration(DefaultBudget), TTL: events.Duration(time.Hour)})
	}
	stored, _, err := encodeSnapshot(st)
	if err != nil {
		b.Fatal(err)
	}
	views, err := viewsEnvelope(st)
	if err != nil {
		b.Fatal(err)
	}
	plain := bytes.Join(views, nil)
	b.Logf("views of %d bytes, stored in %d", len(plain), len(stored))
	b.Run("stored", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := DecodeSnapshot(stored); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline=expanded-whole", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			views, s, err := openSnapshotFrame(stored)
			if err == nil {
				err = s.skipParts()
			}
			if err == nil {
				_, err = decodeViews(views)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline=whole-envelope", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := decodeSnapshotEnvelope(plain); err != nil {
				b.Fatal(err)
			}
		}
	})
}
