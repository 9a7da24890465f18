package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
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
	// meanwhile, when set, runs after the first unanswered publish (and
	// its landing), before the answer is withheld: another writer.
	meanwhile func()
}

func (j *unanswered) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	n := j.calls.Add(1)
	if n > j.first {
		return j.JetStream.PublishMsg(ctx, m, opts...)
	}
	if j.landed {
		if _, err := j.JetStream.PublishMsg(ctx, m, opts...); err != nil {
			return nil, err
		}
	}
	if n == 1 && j.meanwhile != nil {
		j.meanwhile()
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
			health := eventlog.NewLogHealth(time.Now())
			st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{AnswerWait: 200 * time.Millisecond, Health: health})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "c1"))
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
			if got := eventstest.ReadAll(t, st); len(got) != 1 {
				t.Fatalf("log holds %d events, want 1", len(got))
			}
			// The next write of the slot expects the one that landed.
			if _, err := st.Append(ctx, events.SlotAggregate("a"), 1, eventstest.Booting("a", "c1")); err != nil {
				t.Fatalf("next append: %v", err)
			}
		})
	}
}

// A caller whose deadline leaves no room for a second try gets one try
// with all of it; a stream that never answers then leaves the outcome
// unknown after the resolution's one resend.
func TestAnAppendWithinOneAnswerWaitIsTriedOnce(t *testing.T) {
	srv := eventstest.StartServer(t)
	real, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	js := &unanswered{JetStream: real, first: 100}
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{AnswerWait: 5 * time.Second, OutcomeWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "c1")); !errors.Is(err, eventlog.ErrOutcomeUnknown) {
		t.Fatalf("append whose only try got no answer: %v, want outcome unknown", err)
	}
	if js.calls.Load() != 2 {
		t.Fatalf("%d publishes, want 2 (the one try and the resolution's resend)", js.calls.Load())
	}
}

// A caller without a deadline (the views' start, a reactor) gets a few
// tries, not one: the second is answered; a server that never answers
// leaves the append's outcome unknown after three and the resend of its
// resolution.
func TestAnAppendWithoutADeadlineGetsAFewTries(t *testing.T) {
	for _, c := range []struct {
		first     int32
		wantCalls int32
		wantErr   bool
	}{{first: 1, wantCalls: 2}, {first: 100, wantCalls: 4, wantErr: true}} {
		real, err := jetstream.New(eventstest.StartServer(t).Conn)
		if err != nil {
			t.Fatal(err)
		}
		js := &unanswered{JetStream: real, first: c.first}
		st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{AnswerWait: 100 * time.Millisecond, OutcomeWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Append(context.Background(), events.SlotAggregate("a"), 0, eventstest.Created("a", "c1"))
		if (err != nil) != c.wantErr || err != nil && !errors.Is(err, eventlog.ErrOutcomeUnknown) {
			t.Errorf("%d unanswered: append error %v, want error %v (outcome unknown)", c.first, err, c.wantErr)
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
	st0 := c.Store(0, eventlog.StoreConfig{})
	if _, err := st0.Append(context.Background(), events.SlotAggregate("a"), 0, eventstest.Created("a", "c1")); err != nil {
		t.Fatal(err)
	}
	c.WaitStreamStored("CLAIMSTREAM", 1)
	li := c.Index(c.StreamLeader("CLAIMSTREAM"))
	js := c.JetStream(li)
	health := eventlog.NewLogHealth(time.Now())
	logs, logger := logcapture.New(slog.LevelInfo)
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{Replicas: 3, AnswerWait: 300 * time.Millisecond, Health: health,
		Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	stopped := c.StopOthers(li)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		res eventlog.AppendResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := st.Append(ctx, events.SlotAggregate("a"), 1, eventstest.Booting("a", "c1"))
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
	// A quorum of replicas holds the log up to the answered event, and no
	// replica holds more: the resends stored nothing of their own. (The
	// third replica's catch-up is JetStream's own, not what this tests.)
	eventstest.CheckFor(t, 30*time.Second, 25*time.Millisecond, func() error {
		at := 0
		for _, s := range c.Running() {
			last := c.StreamLastSeq(s, "CLAIMSTREAM")
			if last > 2 {
				t.Fatalf("%s holds the log up to %d, past the answered event at 2\n%s", s.Name, last, c.StreamReport("CLAIMSTREAM"))
			}
			if last == 2 {
				at++
			}
		}
		if at < 2 {
			return fmt.Errorf("%d replicas hold the log up to the answered event, want a quorum of 2", at)
		}
		return nil
	})
	if last, err := st.LastSeq(ctx); err != nil || last != 2 {
		t.Fatalf("log ends at %d (%v), want 2\n%s", last, err, c.StreamReport("CLAIMSTREAM"))
	}
}

// An append whose only try got no answer within the caller's deadline is
// resolved before the caller is answered, never reported as a failure of
// the log: landed (read back by its id), sent again and landed, taken by
// another write (a conflict: decide again), or, when the stream never
// answers, an outcome unknown, which is neither a refusal nor a deadline.
func TestAnAppendWhoseAnswerIsLostIsResolvedBeforeTheCallerIsAnswered(t *testing.T) {
	for _, c := range []struct {
		name       string
		first      int32
		landed     bool
		other      bool // another writer takes the slot meanwhile
		wantCalls  int32
		wantSeq    uint64 // the append's event, 0: none
		wantErr    error
		wantEvents int
	}{
		{name: "stored, answer lost", first: 1, landed: true, wantCalls: 1, wantSeq: 1, wantEvents: 1},
		{name: "dropped", first: 1, wantCalls: 2, wantSeq: 1, wantEvents: 1},
		{name: "dropped, slot taken meanwhile", first: 1, other: true, wantCalls: 1, wantErr: eventlog.ErrConflict, wantEvents: 1},
		{name: "stored, slot written after it", first: 1, landed: true, other: true, wantCalls: 1, wantSeq: 1, wantEvents: 2},
		{name: "never answered", first: 100, wantCalls: 2, wantErr: eventlog.ErrOutcomeUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := eventstest.StartServer(t)
			real, err := jetstream.New(srv.Conn)
			if err != nil {
				t.Fatal(err)
			}
			js := &unanswered{JetStream: real, first: c.first, landed: c.landed}
			health := eventlog.NewLogHealth(time.Now())
			// One try: the caller's deadline is shorter than AnswerWait.
			st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{AnswerWait: 5 * time.Second, OutcomeWait: 500 * time.Millisecond, Health: health})
			if err != nil {
				t.Fatal(err)
			}
			if c.other {
				other, err := eventlog.OpenStore(context.Background(), real, eventlog.StoreConfig{})
				if err != nil {
					t.Fatal(err)
				}
				expect := uint64(0)
				if c.landed {
					expect = 1
				}
				js.meanwhile = func() {
					if _, err := other.Append(context.Background(), events.SlotAggregate("a"), expect, eventstest.Created("a", "other")); err != nil {
						t.Errorf("the other writer: %v", err)
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			res, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "c1"))
			switch {
			case c.wantErr == nil && err != nil:
				t.Fatalf("append: %v", err)
			case c.wantErr != nil && !errors.Is(err, c.wantErr):
				t.Fatalf("append: %v, want %v", err, c.wantErr)
			case errors.Is(err, eventlog.ErrLogUnwritable) || errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("append answered as a refusal or a deadline: %v", err)
			}
			if c.wantErr == eventlog.ErrOutcomeUnknown && !strings.Contains(err.Error(), "outcome unknown") {
				t.Fatalf("unknown outcome not said: %v", err)
			}
			if c.wantSeq != 0 && (res.Last != c.wantSeq || res.Events[0].Seq != c.wantSeq) {
				t.Fatalf("append answered %+v, want its event at seq %d", res, c.wantSeq)
			}
			if n := js.calls.Load(); n != c.wantCalls {
				t.Fatalf("%d publishes, want %d", n, c.wantCalls)
			}
			if got := eventstest.ReadAll(t, st); len(got) != c.wantEvents {
				t.Fatalf("log holds %d events, want %d", len(got), c.wantEvents)
			}
		})
	}
}

// A resend whose first try landed meets a conflict; when another writer
// appended to the aggregate after the landing, the aggregate's last event
// is not ours, yet the append landed: it is success, not a conflict the
// caller would decide again on (and write twice).
func TestAResendWhoseFirstTryLandedBeforeAnotherWriteIsSuccess(t *testing.T) {
	srv := eventstest.StartServer(t)
	real, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	other, err := eventlog.OpenStore(context.Background(), real, eventlog.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	js := &unanswered{JetStream: real, first: 1, landed: true, meanwhile: func() {
		if _, err := other.Append(context.Background(), events.SlotAggregate("a"), 1, eventstest.Booting("a", "c1")); err != nil {
			t.Errorf("the other writer: %v", err)
		}
	}}
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{AnswerWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "c1"))
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if res.Last != 1 || js.calls.Load() != 2 {
		t.Fatalf("append answered %+v after %d publishes, want seq 1 after 2", res, js.calls.Load())
	}
}
