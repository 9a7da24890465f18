package projections_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// readerHost names the server that holds the views' consumer, once it is
// the stream's only consumer: a start's read, or a reader just replaced,
// leaves one behind for a moment, and its server is not the views'.
func readerHost(ctx context.Context, st *eventlog.Store) (string, error) {
	s, err := st.JetStream().Stream(ctx, st.Stream())
	if err != nil {
		return "", err
	}
	list := s.ListConsumers(ctx)
	var hosts []string
	for info := range list.Info() {
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return "", fmt.Errorf("consumer %s has no leader yet", info.Name)
		}
		hosts = append(hosts, info.Cluster.Leader)
	}
	if err := list.Err(); err != nil {
		return "", err
	}
	if len(hosts) != 1 {
		return "", fmt.Errorf("%d consumers on the stream, waiting for the views' alone", len(hosts))
	}
	return hosts[0], nil
}

// A replica's views' reader is a consumer that lives on one server of the
// cluster, chosen by JetStream. When that server dies, the reader finds
// out only after missed heartbeats and needs JetStream's meta leader to
// make a new consumer; meanwhile the replica's own writes must still be
// read back (a new leader's LeaderElected, every acknowledged command), so
// WaitFor reads what its reader has not delivered from the stream.
func TestViewsReadTheirWritesWhileTheirReadersServerIsDown(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	st := c.Store(0, eventlog.StoreConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	declareSlots(t, st, 2)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := r.WaitFor(wctx, 3); err != nil {
		t.Fatal(err)
	}

	// The consumer must live on another server than the one the replica
	// is connected through: a deleted consumer is made again, placed anew.
	// A deleted consumer ends the runner's reader, which makes a new one
	// (Restarts counts it); until then the consumer listed may be one the
	// client made again by itself and the runner is about to drop.
	var host string
	var restarts uint64
	eventstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		before := r.ReaderStatus()
		if before.Down || before.Restarts < restarts {
			return errors.New("the views' reader is being made again")
		}
		h, err := readerHost(ctx, st)
		if err != nil {
			return err
		}
		if h == c.Servers[0].Name {
			restarts = before.Restarts + 1
			deleteConsumers(t, st)
			return fmt.Errorf("the views' consumer is on %s, the replica's own server", h)
		}
		if after := r.ReaderStatus(); after != before {
			return errors.New("the views' reader was made again while it was looked up")
		}
		host = h
		return nil
	})
	hostIdx := -1
	for i, s := range c.Servers {
		if s.Name == host {
			hostIdx = i
		}
	}
	if leader := c.StreamLeader(st.Stream()); leader.Name == host {
		c.StepDownStream(st.Stream())
	}
	c.Stop(hostIdx)

	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	res, err := st.Append(actx, events.SlotAggregate("after"), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: "after", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://after"}}})
	if err != nil {
		t.Fatalf("append with %s down: %v\n%s", host, err, c.StreamReport(st.Stream()))
	}
	// Within well under the two missed heartbeats (4 s) a lost consumer
	// takes to be noticed.
	began := time.Now()
	fctx, fcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer fcancel()
	if err := r.WaitFor(fctx, res.Last); err != nil {
		t.Fatalf("the views did not read their own write with the reader's server (%s) down: %v", host, err)
	}
	t.Logf("own write read back %s after the append, with the reader's server down", time.Since(began).Round(time.Millisecond))
	if r.DirectRead() == 0 {
		t.Fatal("the write was read back by the reader of a dead server")
	}
	var slots int
	r.Read(func(s *projections.State) { slots = len(s.Slots) })
	if slots != 3 {
		t.Fatalf("views hold %d slots, want 3", slots)
	}

	// The reader, once made again, passes over what the direct read folded
	// and goes on with what follows: every event once.
	var declared atomic.Int32
	stop := r.Subscribe(func(e events.Event) {
		if _, ok := e.Data.(events.SlotDeclared); ok {
			declared.Add(1)
		}
	})
	defer stop()
	res, err = st.Append(actx, events.SlotAggregate("later"), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: "later", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://later"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody waits for this one: only the reader, made again on a live
	// server, brings it.
	before := r.DirectRead()
	eventstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if seq := r.Seq(); seq < res.Last {
			return fmt.Errorf("the views' reader has not resumed: views at %d, log at %d", seq, res.Last)
		}
		return nil
	})
	if r.DirectRead() != before {
		t.Fatal("an event nobody waited for was read directly")
	}
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := declared.Load(); n != 1 {
			return fmt.Errorf("subscribers were told of %d declarations, want 1", n)
		}
		return nil
	})
	want, err := projections.Rebuild(ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got *projections.State
	r.Read(func(s *projections.State) { got = s })
	if got.Seq != want.Seq || len(got.Slots) != len(want.Slots) || got.Stats != want.Stats {
		t.Fatalf("views at %d with %d slots (%+v), rebuild at %d with %d (%+v)", got.Seq, len(got.Slots), got.Stats, want.Seq, len(want.Slots), want.Stats)
	}
	if n := declared.Load(); n != 1 {
		t.Fatalf("subscribers were told of %d declarations, want 1", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
