package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// openNamed opens the store on srv as replica name, with cfg's limits.
func openNamed(t *testing.T, srv *eventstest.Server, cfg eventlog.StoreConfig) (*eventlog.Store, jetstream.JetStream) {
	t.Helper()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	st, err := eventlog.OpenStore(context.Background(), js, cfg)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return st, js
}

func consumerNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	st, err := js.Stream(context.Background(), "CLAIMSTREAM")
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	l := st.ConsumerNames(context.Background())
	var names []string
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("consumer names: %v", err)
	}
	return names
}

func appendSome(t *testing.T, st *eventlog.Store, n int) {
	t.Helper()
	for i := range n {
		slot := fmt.Sprintf("node-%d", i)
		if _, err := st.Append(context.Background(), events.SlotAggregate(slot), 0, eventstest.Created(slot, "c"+slot)); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

// A reader's consumer ends with its read: neither a bounded read nor a tail
// whose context ended leaves one behind on the stream.
func TestReadsLeaveNoConsumerBehind(t *testing.T) {
	srv := eventstest.StartServer(t)
	st, js := openNamed(t, srv, eventlog.StoreConfig{ReaderName: "claimstream-0"})
	appendSome(t, st, 5)
	for range 20 {
		if got := len(eventstest.ReadAll(t, st)); got != 5 {
			t.Fatalf("read %d events, want 5", got)
		}
	}
	if n := consumerNames(t, js); len(n) != 0 {
		t.Fatalf("after 20 reads the stream has consumers %v, want none", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		done <- st.Tail(ctx, 1, func(events.Event) error { seen <- struct{}{}; return nil })
	}()
	<-seen
	names := consumerNames(t, js)
	if len(names) != 1 || !strings.HasPrefix(names[0], "csread_claimstream-0_") {
		t.Fatalf("a running tail has consumers %v, want one named after its replica", names)
	}
	cancel()
	<-done
	if n := consumerNames(t, js); len(n) != 0 {
		t.Fatalf("after the tail ended the stream has consumers %v, want none", n)
	}
}

// staleReader leaves a consumer as a reader of an earlier life of replica
// owner would have left it when killed.
func staleReader(t *testing.T, js jetstream.JetStream, name string) {
	t.Helper()
	_, err := js.CreateConsumer(context.Background(), "CLAIMSTREAM", jetstream.ConsumerConfig{
		Name: name, AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Hour, MemoryStorage: true,
	})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// A restarted replica deletes the readers' consumers of its earlier life,
// and no one else's.
func TestRestartedReplicaFreesItsStaleReaders(t *testing.T) {
	srv := eventstest.StartServer(t)
	_, js := openNamed(t, srv, eventlog.StoreConfig{ReaderName: "claimstream-1"})
	staleReader(t, js, "csread_claimstream-1_0badc0de_1_0")
	staleReader(t, js, "csread_claimstream-1_0badc0de_2_1")
	staleReader(t, js, "csread_claimstream-2_0badc0de_1_0")
	staleReader(t, js, "sink-pager")

	openNamed(t, srv, eventlog.StoreConfig{ReaderName: "claimstream-1"})
	got := strings.Join(consumerNames(t, js), " ")
	for _, gone := range []string{"csread_claimstream-1_0badc0de_1_0", "csread_claimstream-1_0badc0de_2_1"} {
		if strings.Contains(got, gone) {
			t.Errorf("stale reader %s still there after the restart: %s", gone, got)
		}
	}
	for _, kept := range []string{"csread_claimstream-2_0badc0de_1_0", "sink-pager"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%s, not this replica's, was deleted: left %s", kept, got)
		}
	}
}

// At the stream's consumer limit a reader frees this replica's stale
// readers and starts; when the limit is held by others, the read fails
// with an error that names the limit and what to do.
func TestReadAtTheConsumerLimit(t *testing.T) {
	srv := eventstest.StartServer(t)
	cfg := eventlog.StoreConfig{ReaderName: "claimstream-0", MaxConsumers: 3}
	st, js := openNamed(t, srv, cfg)
	appendSome(t, st, 2)
	staleReader(t, js, "csread_claimstream-0_0badc0de_1_0")
	staleReader(t, js, "csread_claimstream-0_0badc0de_2_0")
	staleReader(t, js, "theirs-1")
	if got := len(eventstest.ReadAll(t, st)); got != 2 {
		t.Fatalf("read %d events at the limit with stale readers, want 2", got)
	}

	staleReader(t, js, "theirs-2")
	staleReader(t, js, "theirs-3")
	err := st.Read(context.Background(), 1, 0, func(events.Event) error { return nil })
	var le *eventlog.ConsumerLimitError
	if !errors.As(err, &le) {
		t.Fatalf("read with the limit held by others: %v, want a *ConsumerLimitError", err)
	}
	if le.Limit != 3 || le.Consumers != 3 || le.Others != 3 {
		t.Errorf("limit error says %d of %d, %d others; want 3 of 3, 3 others", le.Consumers, le.Limit, le.Others)
	}
	for _, want := range []string{"limit of 3 consumers", "nats consumer ls CLAIMSTREAM"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	u, err := st.ConsumerUsage(context.Background())
	if err != nil || u != (eventlog.ConsumerUsage{Consumers: 3, Limit: 3}) {
		t.Errorf("ConsumerUsage = %+v, %v; want 3 of 3", u, err)
	}
}

// Reads in flight are bounded; the views' own reads are not.
func TestReadsInFlightAreBounded(t *testing.T) {
	srv := eventstest.StartServer(t)
	st, _ := openNamed(t, srv, eventlog.StoreConfig{ReaderName: "claimstream-0", MaxReaders: 1})
	appendSome(t, st, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		done <- st.Tail(ctx, 1, func(events.Event) error { seen <- struct{}{}; return nil })
	}()
	<-seen
	err := st.Read(context.Background(), 1, 0, func(events.Event) error { return nil })
	if !errors.Is(err, eventlog.ErrTooManyReaders) {
		t.Fatalf("a second read with MaxReaders 1: %v, want ErrTooManyReaders", err)
	}
	n := 0
	if err := st.Read(eventlog.PriorityRead(context.Background()), 1, 0, func(events.Event) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("a priority read: %d events, %v; want 1, nil", n, err)
	}
	cancel()
	<-done
	if err := st.Read(context.Background(), 1, 0, func(events.Event) error { return nil }); err != nil {
		t.Fatalf("a read once the tail ended: %v", err)
	}
}

// A tail whose connection to the server closes ends with an error: a
// reader (an SSE client's, a follower's) is not left waiting for ever.
func TestATailEndsWhenItsConnectionCloses(t *testing.T) {
	srv := eventstest.StartServer(t)
	nc, err := nats.Connect("", nats.InProcessServer(srv.Server), nats.Nkey(srv.Conn.Opts.Nkey, srv.Conn.Opts.SignatureCB))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	appendSome(t, st, 1)
	seen := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- st.Tail(context.Background(), 1, func(events.Event) error { seen <- struct{}{}; return nil })
	}()
	<-seen
	nc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, nats.ErrConnectionClosed) {
			t.Fatalf("the tail ended with %v, want a closed connection", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the tail did not end within 20s of its connection closing")
	}
}
