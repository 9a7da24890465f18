package natsserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// Two of three replicas stop: the survivor says, once, that the quorum is
// lost and why writes stop, refuses appends at once, and says so again
// when the quorum is back; then writes go on.
func TestQuorumLossStopsWritesAndIsReported(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	st0 := c.Store(0, eventlog.StoreConfig{})
	health := eventlog.NewLogHealth(time.Now())
	logs := &logcapture.Buffer{}
	survivor := c.Servers[0]
	mon := natsserver.NewLogMonitor(survivor.Embedded, health, natsserver.LogMonitorOptions{
		Every: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil)), Stream: st0.Stream(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { mon.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	st := c.Store(0, eventlog.StoreConfig{Health: health})
	// The monitor's first looks may come before the new stream's leader.
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if s := health.Status(); !s.Writable {
			return fmt.Errorf("log status %+v", s)
		}
		return nil
	})
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	// Every replica holds the event before two stop. A replica stopped
	// before its copy took the event came back once (1 run in about 100
	// under -race) without the survivor and it electing a stream leader
	// within 30s: this test is about the quorum, not that election.
	c.WaitStreamStored(st.Stream(), 1)
	if s := survivor.ClusterStatus(); !s.Quorum() || s.Reachable != 3 {
		t.Fatalf("status %+v, want a quorum of 3", s)
	}

	c.Stop(1)
	c.Stop(2)
	want := "JetStream quorum lost: 1 of 3 replicas reachable; writes stop until 2 are up"
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if s := health.Status(); s.Writable || s.Reason != want {
			return fmt.Errorf("log status %+v", s)
		}
		return nil
	})
	begin := time.Now()
	_, err := st.Append(ctx, events.SlotAggregate("a"), 1, eventstest.Booting("a", "a1"))
	if !errors.Is(err, eventlog.ErrLogUnwritable) || !strings.Contains(err.Error(), "quorum lost") {
		t.Fatalf("append without a quorum: %v", err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Fatalf("the refusal took %v; it must be at once", took)
	}
	// Still lost a while later: still one line.
	eventstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if n := logs.Count(`msg="` + want); n != 1 {
			return fmt.Errorf("the loss was logged %d times", n)
		}
		return nil
	})

	c.Start(1)
	// Two replicas elect the meta leader, then the stream's leader; both
	// campaign at once after the loss, and a split vote costs another
	// election timeout (4-9 s) each time.
	eventstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if s := health.Status(); !s.Writable {
			return fmt.Errorf("log status %+v", s)
		}
		return nil
	})
	if n := logs.Count(`msg="JetStream quorum back: 2 of 3 replicas reachable`); n != 1 {
		t.Fatalf("the return of the quorum was logged %d times:\n%s", n, logs.String())
	}
	if n := logs.Count(`msg="` + want); n != 1 {
		t.Fatalf("the loss was logged %d times", n)
	}
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		_, err := st.Append(ctx, events.SlotAggregate("a"), 1, eventstest.Booting("a", "a1"))
		return err
	})
}
