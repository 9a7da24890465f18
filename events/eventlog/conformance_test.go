package eventlog_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/storetest"
)

func TestStoreConformanceSingleServer(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		NewStore: func(t *testing.T) *eventlog.Store {
			st, _ := eventstest.NewStore(t)
			return st
		},
	})
}

// The same behaviours on a real three-node cluster, the stream replicated
// on all three, written through a server that need not lead it.
func TestStoreConformanceCluster(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	var n atomic.Int32
	storetest.Run(t, storetest.Backend{
		NewStore: func(t *testing.T) *eventlog.Store {
			i := n.Add(1)
			st := c.Store(int(i)%3, eventlog.StoreConfig{Stream: fmt.Sprintf("T%d", i), Prefix: fmt.Sprintf("t%d", i)})
			t.Cleanup(func() { eventstest.ValidateLog(t, st) })
			return st
		},
		ChangeLeader: func(t *testing.T, st *eventlog.Store) { c.StepDownStream(st.Stream()) },
	})
}
