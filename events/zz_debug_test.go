package events_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
)

func TestZZDebug(t *testing.T) {
	emb, st, _ := listeningLogged(t, t.TempDir(), 0, nil)
	ctx := context.Background()
	for i := range 20 {
		slot := string(rune('a' + i))
		if _, err := st.Append(ctx, events.SlotAggregate(slot), 0, created(slot, "c"+slot)); err != nil {
			t.Fatal(err)
		}
	}
	var g, s atomic.Int64
	emb.Conn.Subscribe("$JS.FC.>", func(m *nats.Msg) { g.Add(1) })
	emb.SubscribersConn.Subscribe("$JS.FC.>", func(m *nats.Msg) { s.Add(1) })
	emb.Conn.Flush()
	emb.SubscribersConn.Flush()
	_, js, _ := connectReader(t, emb)
	copied(t, js, "CLAIMSTREAM", 20)
	c, err := js.CreatePushConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{DeliverSubject: "$JS.FC.KV_snapshots.watcher.abcd", DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	ci, _ := c.Info(ctx)
	t.Logf("global %d subs %d delivered %d active %v", g.Load(), s.Load(), ci.Delivered.Stream, ci.PushBound)
}
