package projections_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/projections"
)

// A start that meets the stream's consumer limit held by others waits for
// a consumer on its clock instead of failing: meanwhile the reader is down
// and the views' problem names the limit and the fix, one warning says the
// start waits, and the start completes, with every event folded, once a
// consumer can be created.
func TestStartWaitsOutAConsumerLimitHeldByOthers(t *testing.T) {
	srv := eventstest.StartServer(t)
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{ReaderName: "claimstream-0", MaxConsumers: 2})
	if err != nil {
		t.Fatal(err)
	}
	declareSlots(t, st, 3)
	for i := range 2 {
		if _, err := js.CreateConsumer(ctx, st.Stream(), jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("theirs-%d", i), AckPolicy: jetstream.AckNonePolicy,
		}); err != nil {
			t.Fatal(err)
		}
	}

	clk := clocktesting.NewFakeClock(t0)
	logs := &logcapture.Buffer{}
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: clk})
	started := make(chan error, 1)
	go func() { started <- r.Start(ctx) }()

	// Several attempts, each after its backoff on the fake clock.
	for attempt := range 4 {
		eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
			select {
			case err := <-started:
				t.Fatalf("Start returned %v at a consumer limit held by others; want it to wait", err)
			default:
			}
			if !clk.HasWaiters() {
				return fmt.Errorf("attempt %d: the start is not waiting on its clock", attempt)
			}
			return nil
		})
		rs := r.ReaderStatus()
		problem, _ := r.Problem()
		if !rs.Down || !strings.Contains(problem, "limit of 2 consumers") || !strings.Contains(problem, "nats consumer ls") {
			t.Fatalf("while waiting: reader %+v, problem %q; want down, naming the limit and how to list the consumers", rs, problem)
		}
		clk.Step(10 * time.Second)
	}
	if n := strings.Count(logs.String(), "the start waits for a consumer of the log"); n != 1 {
		t.Errorf("%d lines say the start waits, want 1:\n%s", n, logs)
	}

	// Another holder lets one go: the next attempt starts.
	if err := js.DeleteConsumer(ctx, st.Stream(), "theirs-0"); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		select {
		case err := <-started:
			if err != nil {
				t.Fatalf("Start once a consumer is free: %v", err)
			}
			return nil
		default:
		}
		clk.Step(10 * time.Second)
		return errors.New("the start has not completed")
	})
	if got, want := r.Seq(), uint64(4); got != want {
		t.Errorf("views at seq %d after the start, want %d", got, want)
	}
	if rs := r.ReaderStatus(); rs.Down {
		t.Errorf("reader still down after the start: %+v", rs)
	}
	if p, _ := r.Problem(); p != "" {
		t.Errorf("problem after the start: %q", p)
	}
	if !strings.Contains(logs.String(), "a consumer of the log was created; the start goes on") {
		t.Errorf("no line says the wait ended:\n%s", logs)
	}
}

// A replica that starts while its peers are down (its stream has no leader
// and no quorum) waits for the log to answer instead of ending the process:
// meanwhile the reader is down and the views' problem says why, one warning
// says the start waits, and the start completes with every event once the
// peers are back.
func TestStartWaitsForALogThatDoesNotAnswerYet(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	st := c.Store(0, eventlog.StoreConfig{})
	declareSlots(t, st, 3)
	c.WaitStreamStored(st.Stream(), 4)
	stopped := c.StopOthers(0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &logcapture.Buffer{}
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	started := make(chan error, 1)
	go func() { started <- r.Start(ctx) }()

	eventstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		select {
		case err := <-started:
			t.Fatalf("Start returned %v without a quorum; want it to wait", err)
		default:
		}
		problem, _ := r.Problem()
		if !r.ReaderStatus().Down || !strings.Contains(problem, "the event log does not answer yet") {
			return fmt.Errorf("reader %+v, problem %q: not yet waiting for the log", r.ReaderStatus(), problem)
		}
		return nil
	})

	for _, i := range stopped {
		c.Start(i)
	}
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start after the peers came back: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("Start did not complete within 90s of the peers coming back")
	}
	if got := r.Seq(); got != 4 {
		t.Errorf("views at seq %d, want 4 (every event)", got)
	}
	if rs := r.ReaderStatus(); rs.Down {
		t.Errorf("reader still down after the start: %+v", rs)
	}
	if n := strings.Count(logs.String(), "the start waits for the event log to answer"); n != 1 {
		t.Errorf("%d lines say the start waits, want 1:\n%s", n, logs)
	}
}
