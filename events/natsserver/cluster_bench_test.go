package natsserver_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// BenchmarkAppendR1VsR3 measures sequential appends with expectation and
// Nats-Msg-Id, fsync on, in process: R1 on one server against R3 on a
// three-node cluster on loopback routes (all three servers in this
// process, on the same cores), written through the stream's leader.
// Latency quantiles come from every append of the run.
//
//	go test ./events/natsserver -run '^$' -bench AppendR1VsR3 -count 3
func BenchmarkAppendR1VsR3(b *testing.B) {
	b.Run("R1", func(b *testing.B) {
		srv := eventstest.StartServer(b)
		srv.NoSync = false
		srv.Restart()
		st := srv.Store()
		benchAppendLatency(b, st)
	})
	b.Run("R3", func(b *testing.B) {
		c := eventstest.StartClusterWith(b, 3, eventstest.ClusterOptions{Sync: true})
		probe := c.Store(0, eventlog.StoreConfig{Replicas: 3})
		leader := c.Index(c.StreamLeader(probe.Stream()))
		st := c.Store(leader, eventlog.StoreConfig{Replicas: 3})
		benchAppendLatency(b, st)
	})
}

func benchAppendLatency(b *testing.B, st *eventlog.Store) {
	ctx := context.Background()
	last := make([]uint64, 1000)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % 1000
		slot := fmt.Sprintf("node-%d", k)
		begin := time.Now()
		res, err := st.Append(ctx, events.SlotAggregate(slot), last[k], eventstest.Created(slot, fmt.Sprintf("c%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(begin))
		last[k] = res.Last
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}
