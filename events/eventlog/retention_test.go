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

// An aggregate whose events all expired can still be written to by a
// decider that expects its last (expired) event; a write racing a newer
// event of the aggregate still conflicts.
func TestAppendAfterTheAggregateExpired(t *testing.T) {
	srv := eventstest.StartServer(t)
	ctx := context.Background()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{MaxAge: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	slot := func(name string) events.Data {
		return events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}
	}
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, events.Event{Time: time.Now(), Data: slot("a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("b"), 0, events.Event{Time: time.Now(), Data: slot("b")}); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := st.Bounds(ctx)
		if err != nil || b.First < 3 || !b.Truncated() {
			return fmt.Errorf("bounds %+v (%v)", b, err)
		}
		return nil
	})
	res, err := st.Append(ctx, events.SlotAggregate("a"), 1, events.Event{Time: time.Now(), Data: slot("a")})
	if err != nil {
		t.Fatalf("append expecting the expired seq 1: %v", err)
	}
	if res.Last != 3 {
		t.Fatalf("landed at %d, want 3", res.Last)
	}
	// b expects seq 2 (expired), but a newer event of b is in the log.
	if _, err := st.Append(ctx, events.SlotAggregate("b"), 0, events.Event{Time: time.Now(), Data: slot("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("b"), 2, events.Event{Time: time.Now(), Data: slot("b")}); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("append racing a newer event of the aggregate: %v, want a conflict", err)
	}
}
