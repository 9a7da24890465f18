package provider

import (
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
)

// BenchmarkPublish is what the publish hook adds to the fold of one event
// (under the views' write lock) on the pool of 10,000 slots in 100 groups:
// an event of one group builds that group's answers again (100 slots); an
// event that names no group builds every group's.
//
//	go test ./provider -run '^$' -bench Publish -benchtime 2s
func BenchmarkPublish(b *testing.B) {
	h := handlerstest.New(b)
	benchPool(b, h)
	srv := New(h.Views, h.Service, h.Clock, Options{Logger: discard})
	for _, c := range []struct {
		name string
		data events.Data
	}{
		{"group-event", events.GroupChanged{Ref: events.Ref{Group: benchGroup(7), Slot: benchGroup(7) + "-n003"}}},
		{"no-group-event", events.LeaderElected{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			// No event is appended meanwhile, so the hook may run under the
			// read lock here.
			h.Views.Read(func(st *projections.State) {
				e := events.Event{Seq: st.Seq, Data: c.data}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					srv.reads.publish(st, &e)
				}
			})
		})
	}
}
