package eventlog_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// TestMemoryStoreKeepsTheStreamInMemory: a store opened with Memory (a
// what-if run's throwaway log) is a memory stream that still appends with
// expectations, refuses a stale one and reads back what it holds.
func TestMemoryStoreKeepsTheStreamInMemory(t *testing.T) {
	srv := eventstest.StartServer(t)
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{Memory: true})
	if err != nil {
		t.Fatalf("open a memory store: %v", err)
	}
	stream, err := js.Stream(ctx, st.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if got := stream.CachedInfo().Config.Storage; got != jetstream.MemoryStorage {
		t.Fatalf("storage %v, want memory", got)
	}
	slot := events.SlotAggregate("node-1")
	if _, err := st.Append(ctx, slot, 0, eventstest.Created("node-1", "c1")); err != nil {
		t.Fatalf("first append: %v", err)
	}
	if _, err := st.Append(ctx, slot, 1, eventstest.Booting("node-1", "c1")); err != nil {
		t.Fatalf("append with expectation 1: %v", err)
	}
	if _, err := st.Append(ctx, slot, 1, eventstest.Booting("node-1", "c1")); err == nil {
		t.Fatal("a stale expectation was accepted")
	}
	if got := eventstest.ReadAll(t, st); len(got) != 2 {
		t.Fatalf("read %d events, want 2", len(got))
	}
}
