package events_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
)

// unansweredFirst is a real JetStream whose first publish gets no answer,
// as when the stream's leader takes a write in and loses its leadership:
// either the write is dropped (landed false) or it is stored and only the
// answer is lost (landed true).
type unansweredFirst struct {
	jetstream.JetStream
	landed bool
	calls  atomic.Int32
}

func (j *unansweredFirst) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if j.calls.Add(1) > 1 {
		return j.JetStream.PublishMsg(ctx, m, opts...)
	}
	if j.landed {
		if _, err := j.JetStream.PublishMsg(ctx, m, opts...); err != nil {
			return nil, err
		}
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestAnAppendLeftUnansweredIsSentAgainAndLandsOnce(t *testing.T) {
	for _, landed := range []bool{false, true} {
		name := map[bool]string{false: "dropped", true: "stored, answer lost"}[landed]
		t.Run(name, func(t *testing.T) {
			srv := eventstest.StartServer(t)
			real, err := jetstream.New(srv.Conn)
			if err != nil {
				t.Fatal(err)
			}
			js := &unansweredFirst{JetStream: real, landed: landed}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			st, err := events.OpenStore(ctx, js, events.StoreConfig{AnswerWait: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := st.Append(ctx, events.SlotAggregate("a"), 0, created("a", "c1"))
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("append took %v: it waited for the lost answer instead of sending again", took)
			}
			if js.calls.Load() != 2 {
				t.Fatalf("%d publishes, want 2 (the unanswered one and its resend)", js.calls.Load())
			}
			if res.Last != 1 || res.Events[0].Seq != 1 {
				t.Fatalf("append answered %+v, want the event at seq 1", res)
			}
			if got := readAll(t, st); len(got) != 1 {
				t.Fatalf("log holds %d events, want 1", len(got))
			}
			// The next write of the slot expects the one that landed.
			if _, err := st.Append(ctx, events.SlotAggregate("a"), 1, booting("a", "c1")); err != nil {
				t.Fatalf("next append: %v", err)
			}
		})
	}
}

// A caller whose deadline leaves no room for a second try gets one try
// with all of it, and the error of that try.
func TestAnAppendWithinOneAnswerWaitIsTriedOnce(t *testing.T) {
	srv := eventstest.StartServer(t)
	real, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	js := &unansweredFirst{JetStream: real}
	st, err := events.OpenStore(context.Background(), js, events.StoreConfig{AnswerWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, created("a", "c1")); err == nil {
		t.Fatal("append answered although its only try got no answer")
	}
	if js.calls.Load() != 1 {
		t.Fatalf("%d publishes, want 1", js.calls.Load())
	}
}
