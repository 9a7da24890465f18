package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// slotWrites is n one-event writes, one per slot s-0 .. s-(n-1).
func slotWrites(n int) []events.Write {
	ws := make([]events.Write, n)
	for i := range ws {
		slot := fmt.Sprintf("s-%d", i)
		ws[i] = events.Write{Aggregate: events.SlotAggregate(slot), Events: []events.Event{eventstest.Created(slot, "c-"+slot)}}
	}
	return ws
}

// TestAppendOverTheLimitIsRefusedBeforeSending: an append of more events
// than one atomic batch may hold fails with ErrAppendTooLarge, a short
// message, and nothing in the log; an append of exactly the limit lands.
func TestAppendOverTheLimitIsRefusedBeforeSending(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()

	_, err := st.AppendWrites(ctx, slotWrites(eventlog.MaxEventsPerAppend+1)...)
	if !errors.Is(err, eventlog.ErrAppendTooLarge) {
		t.Fatalf("append of %d events: %v, want ErrAppendTooLarge", eventlog.MaxEventsPerAppend+1, err)
	}
	want := "append of 1001 events to 1001 aggregates: slot/s-0, slot/s-1, slot/s-2 and 998 more: more than 1000 events cannot be one atomic append; split the decision"
	if err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}
	if last, err := st.LastSeq(ctx); err != nil || last != 0 {
		t.Fatalf("the refused append left the log at seq %d (%v)", last, err)
	}

	res, err := st.AppendWrites(ctx, slotWrites(eventlog.MaxEventsPerAppend)...)
	if err != nil {
		t.Fatalf("append of exactly %d events: %v", eventlog.MaxEventsPerAppend, err)
	}
	if res.First != 1 || res.Last != eventlog.MaxEventsPerAppend {
		t.Errorf("landed at %d..%d", res.First, res.Last)
	}
}

// TestMaxEventsPerAppendIsTheServersLimit pins the constant to the embedded
// server: a raw atomic batch one longer is refused by the server itself.
func TestMaxEventsPerAppendIsTheServersLimit(t *testing.T) {
	srv := eventstest.StartServer(t)
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, AllowAtomicPublish: true}); err != nil {
		t.Fatal(err)
	}
	batch := func(n int) []*nats.Msg {
		msgs := make([]*nats.Msg, n)
		for i := range msgs {
			msgs[i] = &nats.Msg{Subject: fmt.Sprintf("raw.%d", i), Data: []byte("x"), Header: nats.Header{}}
		}
		return msgs
	}
	if _, err := jetstreamext.PublishMsgBatch(ctx, js, batch(eventlog.MaxEventsPerAppend)); err != nil {
		t.Fatalf("a batch of %d: %v", eventlog.MaxEventsPerAppend, err)
	}
	_, err = jetstreamext.PublishMsgBatch(ctx, js, batch(eventlog.MaxEventsPerAppend+1))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10199 {
		t.Fatalf("a batch of %d: %v, want the server's err_code 10199", eventlog.MaxEventsPerAppend+1, err)
	}
}

// TestAppendErrorNamesAggregatesBriefly: a failed append of many writes
// names their count and the first few, not every one.
func TestAppendErrorNamesAggregatesBriefly(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := st.AppendWrites(ctx, slotWrites(500)...)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("append with a cancelled context: %v", err)
	}
	if want := "append to 500 aggregates: slot/s-0, slot/s-1, slot/s-2 and 497 more: "; !strings.HasPrefix(err.Error(), want) || len(err.Error()) > 200 {
		t.Errorf("error %q, want it short and starting %q", err, want)
	}
}
