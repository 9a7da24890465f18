package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// On a real cluster whose JetStream has no meta leader, the server answers
// a reader's consumer create with "temporarily unavailable" (10008) at
// once. A read started then waits the election out and reads the whole
// log, instead of failing the caller (an export, a follower's catch-up)
// for a moment's election.
func TestAReadWaitsOutAClusterWithoutALeader(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	st := c.Store(0, eventlog.StoreConfig{})
	for i, slot := range []string{"a", "b", "c"} {
		if _, err := st.Append(context.Background(), events.SlotAggregate(slot), 0, eventstest.Created(slot, fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitStreamStored("CLAIMSTREAM", 3)
	stopped := c.StopOthers(0)
	// Server 0 alone: once it knows it has no meta leader, it refuses a
	// consumer create with 10008 rather than leaving it unanswered.
	js := c.JetStream(0)
	eventstest.CheckFor(t, 40*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.OrderedConsumer(ctx, "CLAIMSTREAM", jetstream.OrderedConsumerConfig{})
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == 10008 {
			return nil
		}
		return fmt.Errorf("consumer create on a lone server: %v, want 10008", err)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	var read []uint64
	go func() {
		done <- st.Read(ctx, 1, 3, func(e events.Event) error {
			read = append(read, e.Seq)
			return nil
		})
	}()
	back := time.Now()
	for _, i := range stopped {
		c.Start(i)
	}
	if err := <-done; err != nil {
		t.Fatalf("read once the servers are back: %v", err)
	}
	t.Logf("read answered %v after the servers were started", time.Since(back).Round(time.Millisecond))
	if len(read) != 3 || read[0] != 1 || read[2] != 3 {
		t.Fatalf("read %v, want 1..3", read)
	}
}
