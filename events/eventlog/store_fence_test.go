package eventlog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// paused is a real JetStream whose publishes, once pause is set, wait
// until release is closed: a leader stopped (SIGSTOP) in the middle of an
// append, after it decided and before its message left.
type paused struct {
	jetstream.JetStream
	pause   bool
	entered chan struct{}
	release chan struct{}
}

func (j *paused) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if j.pause {
		close(j.entered)
		<-j.release
	}
	return j.JetStream.PublishMsg(ctx, m, opts...)
}

func elected(replica string, epoch uint64) events.Event {
	return events.Event{Time: eventstest.T0, Epoch: epoch, Data: events.LeaderElected{Replica: replica, Epoch: epoch, Cause: "test"}}
}

// fencedLeaders runs the deposed leader's story on two stores of one log:
// a elected, writing under its fence, paused mid-append while b is
// elected, then resumed.
func fencedLeaders(t *testing.T, replicas int, aJS, bJS jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pj := &paused{JetStream: aJS, entered: make(chan struct{}), release: make(chan struct{})}
	a, err := eventlog.OpenStore(ctx, pj, eventlog.StoreConfig{Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eventlog.OpenStore(ctx, bJS, eventlog.StoreConfig{Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	ea, err := a.Append(ctx, events.Leadership(), 0, elected("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	fa := eventlog.Fenced(ctx, ea.Last)
	slot := events.SlotAggregate("n1")
	w1, err := a.Append(fa, slot, 0, eventstest.Created("n1", "c1"))
	if err != nil {
		t.Fatalf("the leader's fenced append: %v", err)
	}
	// The process's own check of the first write's expectation.
	if _, err := a.Append(fa, slot, 0, eventstest.Created("n1", "c2")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("a fenced append expecting a stale seq: %v, want a conflict", err)
	}

	pj.pause = true
	done := make(chan error, 1)
	go func() {
		_, err := a.AppendWrites(fa,
			events.Write{Aggregate: slot, Expected: w1.Last, Events: []events.Event{eventstest.Booting("n1", "c1")}},
		)
		done <- err
	}()
	<-pj.entered
	eb, err := b.Append(ctx, events.Leadership(), ea.Last, elected("b", 2))
	if err != nil {
		t.Fatalf("b's election: %v", err)
	}
	close(pj.release)
	err = <-done
	var fe *eventlog.FencedError
	if !errors.As(err, &fe) || fe.Fence != ea.Last || fe.Now != eb.Last {
		t.Fatalf("the deposed leader's append after b's election: %v, want a FencedError (fence %d, now %d)", err, ea.Last, eb.Last)
	}
	// And a multi-aggregate write of the deposed leader, not paused.
	pj.pause = false
	_, err = a.AppendWrites(fa,
		events.Write{Aggregate: events.SlotAggregate("n2"), Events: []events.Event{eventstest.Created("n2", "c3")}},
		events.Write{Aggregate: events.SlotAggregate("n3"), Events: []events.Event{eventstest.Created("n3", "c4")}},
	)
	if !errors.Is(err, eventlog.ErrFenced) {
		t.Fatalf("the deposed leader's batch: %v, want ErrFenced", err)
	}
	// The new leader writes under its own fence.
	nb := eventstest.Booting("n1", "c1")
	nb.Epoch = 2
	if _, err := b.Append(eventlog.Fenced(ctx, eb.Last), slot, w1.Last, nb); err != nil {
		t.Fatalf("the new leader's fenced append: %v", err)
	}
	var after []string
	seenB := false
	if err := b.Read(ctx, 1, 0, func(e events.Event) error {
		if d, ok := e.Data.(events.LeaderElected); ok && d.Replica == "b" {
			seenB = true
			return nil
		}
		if seenB && e.Epoch != 2 {
			after = append(after, string(e.Type))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(after) != 0 {
		t.Fatalf("events of the deposed leader after the new election: %v", after)
	}
}

func TestFencedAppendOfADeposedLeaderIsRefusedByTheLog(t *testing.T) {
	srv := eventstest.StartServer(t)
	js := func() jetstream.JetStream {
		j, err := jetstream.New(srv.Conn)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	fencedLeaders(t, 1, js(), js())
}

func TestFencedAppendOfADeposedLeaderIsRefusedOnThreeReplicas(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	c.Store(0, eventlog.StoreConfig{})
	fencedLeaders(t, 3, c.JetStream(0), c.JetStream(2))
}
