package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// unanswered is a real JetStream whose first publishes (first of them)
// get no answer, as when the stream's leader takes a write in and loses
// its leadership: either the write is dropped (landed false) or it is
// stored and only the answer is lost (landed true).
type unanswered struct {
	jetstream.JetStream
	first  int32
	landed bool
	calls  atomic.Int32
}

func (j *unanswered) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if j.calls.Add(1) > j.first {
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
			js := &unanswered{JetStream: real, first: 1, landed: landed}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			health := events.NewLogHealth(time.Now())
			st, err := events.OpenStore(ctx, js, events.StoreConfig{AnswerWait: 200 * time.Millisecond, Health: health})
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
			if n := health.Resends(); n != 1 {
				t.Fatalf("%d resends counted, want 1", n)
			}
			if f := health.WriteFailures(); len(f) != 0 {
				t.Fatalf("failures counted %v for an append that landed", f)
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
	js := &unanswered{JetStream: real, first: 1}
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

// A caller without a deadline (the views' start, a reactor) gets a few
// tries, not one: the second is answered; a server that never answers
// fails the append after three.
func TestAnAppendWithoutADeadlineGetsAFewTries(t *testing.T) {
	for _, c := range []struct {
		first     int32
		wantCalls int32
		wantErr   bool
	}{{first: 1, wantCalls: 2}, {first: 100, wantCalls: 3, wantErr: true}} {
		real, err := jetstream.New(eventstest.StartServer(t).Conn)
		if err != nil {
			t.Fatal(err)
		}
		js := &unanswered{JetStream: real, first: c.first}
		st, err := events.OpenStore(context.Background(), js, events.StoreConfig{AnswerWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Append(context.Background(), events.SlotAggregate("a"), 0, created("a", "c1"))
		if (err != nil) != c.wantErr {
			t.Errorf("%d unanswered: append error %v, want error %v", c.first, err, c.wantErr)
		}
		if n := js.calls.Load(); n != c.wantCalls {
			t.Errorf("%d unanswered: %d publishes, want %d", c.first, n, c.wantCalls)
		}
	}
}

// On a real cluster: the stream's leader takes an append in while neither
// follower runs, so it cannot commit it and does not answer. The resends
// meet the write still held ("in process") and wait; once the followers are
// back the first try commits, and the append is answered with it, stored
// once.
func TestAnAppendHeldByALeaderWithoutQuorumIsAnsweredOnceItCommits(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	st0 := c.Store(0, events.StoreConfig{})
	if _, err := st0.Append(context.Background(), events.SlotAggregate("a"), 0, created("a", "c1")); err != nil {
		t.Fatal(err)
	}
	c.WaitStreamStored("CLAIMSTREAM", 1)
	li := c.Index(c.StreamLeader("CLAIMSTREAM"))
	js := c.JetStream(li)
	health := events.NewLogHealth(time.Now())
	logs, logger := logcapture.New(slog.LevelInfo)
	st, err := events.OpenStore(context.Background(), js, events.StoreConfig{Replicas: 3, AnswerWait: 300 * time.Millisecond, Health: health,
		Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	stopped := c.StopOthers(li)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		res events.AppendResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := st.Append(ctx, events.SlotAggregate("a"), 1, booting("a", "c1"))
		done <- result{res, err}
	}()
	eventstest.CheckFor(t, 8*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(logs.String(), "append held by the stream's leader") {
			return fmt.Errorf("no resend met the held write yet (%d resends); log:\n%s", health.Resends(), logs.String())
		}
		return nil
	})
	select {
	case r := <-done:
		t.Fatalf("append answered without a quorum: %+v, %v", r.res, r.err)
	default:
	}
	back := time.Now()
	for _, i := range stopped {
		c.Start(i)
	}
	r := <-done
	t.Logf("answered %v after the followers were started", time.Since(back))
	if r.err != nil {
		t.Fatalf("append once the followers are back: %v\n%s", r.err, c.StreamReport("CLAIMSTREAM"))
	}
	if r.res.Last != 2 {
		t.Fatalf("append answered %+v, want the event at seq 2", r.res)
	}
	// Every replica holds the log up to the answered event and no further:
	// the resends stored nothing of their own.
	c.WaitStreamStored("CLAIMSTREAM", 2)
	if last, err := st.LastSeq(ctx); err != nil || last != 2 {
		t.Fatalf("log ends at %d (%v), want 2\n%s", last, err, c.StreamReport("CLAIMSTREAM"))
	}
}
