package projections_test

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// BenchmarkReplayAt measures a replay to a random past instant over the
// bench log with a checkpoint every 100,000 events and every 10,000 (the
// serve default; CLAIMSTREAM_BENCH_CHECKPOINT_EVERY runs one value). It reports the replays' p50 and p99, and what a checkpoint
// costs (time to encode and store, bytes):
//
//	CLAIMSTREAM_BENCH_EVENTS=1000000 go test ./projections -run '^$' -bench ReplayAt -benchtime 1x
func BenchmarkReplayAt(b *testing.B) {
	n := benchEvents()
	srv, st, _ := benchLog(b, n)
	defer srv.Shutdown()
	ctx := context.Background()
	cps, err := projections.OpenCheckpoints(ctx, st.JetStream(), "bench-checkpoints", 1)
	if err != nil {
		b.Fatal(err)
	}
	everies := []uint64{100_000, 10_000}
	if v, err := strconv.ParseUint(os.Getenv("CLAIMSTREAM_BENCH_CHECKPOINT_EVERY"), 10, 64); err == nil && v > 0 {
		everies = []uint64{v}
	}
	for _, every := range everies {
		b.Run("checkpoint-every="+strconv.FormatUint(every, 10), func(b *testing.B) {
			old, err := cps.List(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for _, cp := range old {
				if err := cps.Delete(ctx, cp.Seq); err != nil {
					b.Fatal(err)
				}
			}
			// Checkpoints as the runner takes them, every `every` events.
			s := projections.NewState()
			var first, last time.Time
			var saveTook []time.Duration
			var bytes uint64
			err = st.Read(ctx, 1, 0, func(e events.Event) error {
				_ = projections.Evolve(s, e)
				if first.IsZero() {
					first = e.Time
				}
				last = e.Time
				if e.Seq%every == 0 {
					begin := time.Now()
					info, err := cps.Save(ctx, s, e.Time)
					if err != nil {
						return err
					}
					saveTook = append(saveTook, time.Since(begin))
					bytes = max(bytes, info.Size)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, uint64(every)))
			var took []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := 0; k < 50; k++ {
					at := first.Add(time.Duration(rng.Int64N(int64(last.Sub(first)))))
					begin := time.Now()
					got, err := projections.ReplayUntil(ctx, st, cps, at)
					if err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(begin))
					if got.Seq == 0 {
						b.Fatalf("replay at %s folded nothing", at)
					}
				}
			}
			b.StopTimer()
			// What a replay pays before its tail: read and decode one
			// checkpoint.
			var loads []time.Duration
			list, err := cps.List(ctx)
			if err != nil || len(list) == 0 {
				b.Fatalf("checkpoints %v: %v", list, err)
			}
			for k := 0; k < 10; k++ {
				// A fresh handle: read from the bucket, not the cache.
				cold, err := projections.OpenCheckpoints(ctx, st.JetStream(), "bench-checkpoints", 1)
				if err != nil {
					b.Fatal(err)
				}
				begin := time.Now()
				if _, err := cold.Load(ctx, list[len(list)-1].Seq); err != nil {
					b.Fatal(err)
				}
				loads = append(loads, time.Since(begin))
			}
			slices.Sort(loads)
			b.ReportMetric(pct(loads, 50).Seconds(), "load-s")
			slices.Sort(took)
			slices.Sort(saveTook)
			b.ReportMetric(pct(took, 50).Seconds(), "p50-s")
			b.ReportMetric(pct(took, 99).Seconds(), "p99-s")
			b.ReportMetric(pct(saveTook, 50).Seconds(), "checkpoint-s")
			b.ReportMetric(float64(bytes), "checkpoint-bytes")
		})
	}
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}
