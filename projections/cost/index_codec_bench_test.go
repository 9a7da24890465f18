package cost

import (
	"testing"
)

// The saved copy of the benchmark log's index (1,000,000 events, 10,000
// slots): its size, and the time to encode and to decode it.
func BenchmarkIndexCopy(b *testing.B) {
	x := NewIndex()
	evs := benchLog(b)
	for _, e := range evs {
		x.Apply(e)
	}
	seq := uint64(len(evs))
	saved := mustMarshal(b, x, seq)
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			saved = mustMarshal(b, x, seq)
		}
		b.ReportMetric(float64(len(saved)), "bytes")
		b.ReportMetric(float64(x.Spans()), "spans")
		b.ReportMetric(float64(len(saved))/float64(x.Spans()), "bytes/span")
	})
	b.Run("unmarshal", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := UnmarshalIndex(saved); err != nil {
				b.Fatal(err)
			}
		}
	})
}
