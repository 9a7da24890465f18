package projections

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/claimstream/claimstream/events"
)

// BenchmarkDecodeSnapshot reads the views of 10,000 slots with a claim
// each from their stored form: decoded as they are expanded, as a start
// reads them (stored), and expanded whole and then decoded in one pass;
// and from their JSON held whole, by the whole-envelope reader.
func BenchmarkDecodeSnapshot(b *testing.B) {
	st := benchViews()
	stored, _, err := encodeSnapshot(st)
	if err != nil {
		b.Fatal(err)
	}
	plain, err := viewsJSON(st)
	if err != nil {
		b.Fatal(err)
	}
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

// benchViews are the views of 10,000 slots with a claim each.
func benchViews() *State {
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
	return st
}

// BenchmarkEncodeSnapshot stores the views of 10,000 slots and a part of
// 16 MiB, as serve writes a snapshot (stored: compressed as they are
// encoded), against the frame built whole and then compressed (baseline).
// heap-peak-MiB is the most the heap held above where it began, sampled
// every millisecond during one more store.
func BenchmarkEncodeSnapshot(b *testing.B) {
	st := benchViews()
	part := make([]byte, 16<<20)
	for i := range part {
		part[i] = byte(i * 7 / 4096)
	}
	write := func(w io.Writer) error {
		for p := part; len(p) > 0; p = p[min(len(p), 4096):] {
			if _, err := w.Write(p[:min(len(p), 4096)]); err != nil {
				return err
			}
		}
		return nil
	}
	stored := func() error {
		_, _, err := encodeSnapshotParts(st, []snapshotPart{{name: "cost", write: write}})
		return err
	}
	whole := func() error {
		views, err := viewsJSON(st)
		if err != nil {
			return err
		}
		data := slices.Clone(part) // a part's bytes, as a projection returned them whole
		var out bytes.Buffer
		zw := s2.NewWriter(&out, s2.WriterConcurrency(1))
		_, _ = zw.Write([]byte(snapshotMagic))
		for _, f := range [][]byte{[]byte(viewsPart), views, []byte("cost"), data} {
			_, _ = zw.Write(binary.AppendUvarint(nil, uint64(len(f))))
			_, _ = zw.Write(f)
		}
		if err := zw.Close(); err != nil {
			return err
		}
		_ = slices.Clone(out.Bytes()) // stored with no spare capacity
		return nil
	}
	for _, c := range []struct {
		name  string
		store func() error
	}{{"stored", stored}, {"baseline=whole", whole}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := c.store(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(heapPeak(c.store)/(1<<20), "heap-peak-MiB")
		})
	}
}

// heapPeak is the most the heap held above where it began while f ran,
// sampled every millisecond.
func heapPeak(f func() error) float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			if s.HeapAlloc > base && s.HeapAlloc-base > peak.Load() {
				peak.Store(s.HeapAlloc - base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	_ = f()
	close(done)
	<-sampled
	return float64(peak.Load())
}
