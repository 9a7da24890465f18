package eventlog_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// BenchmarkAppend measures sequential appends, in process, round-robin
// over 1,000 slots. The baseline publishes the same messages with no
// expectation header; Append carries the wildcard subject-sequence
// expectation and a Nats-Msg-Id. With fsync is the default of serve.
//
//	go test ./events/eventlog -run '^$' -bench Append -count 5
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{false, true} {
		mode := "nosync"
		if sync {
			mode = "fsync"
		}
		b.Run("baseline=publish-no-expectation/"+mode, func(b *testing.B) {
			st := benchStore(b, sync)
			js := st.JetStream()
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				slot := fmt.Sprintf("node-%d", i%1000)
				ev := eventstest.Created(slot, fmt.Sprintf("c%d", i))
				ev.ID = fmt.Sprintf("id-%d", i)
				m, err := eventlog.ToMsg(ev, st.Subjects().Subject(events.SlotAggregate(slot), events.TypeClaimCreated))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := js.PublishMsg(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
		b.Run("append-with-expectation/"+mode, func(b *testing.B) {
			st := benchStore(b, sync)
			ctx := context.Background()
			last := make([]uint64, 1000)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := i % 1000
				slot := fmt.Sprintf("node-%d", k)
				res, err := st.Append(ctx, events.SlotAggregate(slot), last[k], eventstest.Created(slot, fmt.Sprintf("c%d", i)))
				if err != nil {
					b.Fatal(err)
				}
				last[k] = res.Last
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func benchStore(b *testing.B, sync bool) *eventlog.Store {
	srv := eventstest.StartServer(b)
	if sync {
		srv.NoSync = false
		srv.Restart()
	}
	return srv.Store()
}
