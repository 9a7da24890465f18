package eventstest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventstest"
)

// A publisher allowed few outstanding messages, with no patience for a
// stall (a busy machine, in short), still publishes a long run of them: it
// waits for each chunk's acknowledgements instead of stalling.
func TestBoundedPublisherNeverStalls(t *testing.T) {
	srv := eventstest.StartServer(t)
	const maxPending = 16
	js, err := jetstream.New(srv.Conn, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "GEN", Subjects: []string{"gen.>"}}); err != nil {
		t.Fatal(err)
	}
	const n = 20_000
	p := eventstest.NewBoundedPublisher(js, maxPending, jetstream.WithStallWait(time.Microsecond))
	for i := range n {
		if err := p.Publish(ctx, &nats.Msg{Subject: fmt.Sprintf("gen.%d", i%100), Data: []byte("x")}); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "GEN")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().State.Msgs; got != n {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got = info.State.Msgs; got != n {
			t.Fatalf("stream holds %d messages, want %d", got, n)
		}
	}
}

// A refused message (here: no stream takes its subject) is reported by
// Flush, naming the subject.
func TestBoundedPublisherReportsARefusal(t *testing.T) {
	srv := eventstest.StartServer(t)
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := eventstest.NewBoundedPublisher(js, 0)
	if err := p.Publish(ctx, &nats.Msg{Subject: "nowhere.1", Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err == nil {
		t.Fatal("a message no stream takes was not reported")
	} else {
		t.Logf("reported: %v", err)
	}
}
