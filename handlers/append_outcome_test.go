package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/projections"
)

// On a real 3-node cluster the stream's leader loses its quorum after an
// IncreaseSize's publish went out (the followers are stopped; the log's
// monitor sees the loss when the append goes unanswered): the answer is
// success or an unknown outcome, never a refusal, though the log turned
// unwritable while the append waited. Once the followers are back the
// caller retries the same request (same key) until it succeeds: the group
// has one claim, whatever became of the first append.
func TestAnIncreaseSizeWhoseQuorumIsLostAfterThePublishIsNotARefusal(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	c.Store(0, eventlog.StoreConfig{}) // the R3 stream
	li := c.Index(c.StreamLeader("CLAIMSTREAM"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	logs, logger := logcapture.New(slog.LevelInfo)
	health := eventlog.NewLogHealth(time.Now())
	// The monitor looks at start, when an append goes unanswered, and when
	// the test steps its clock.
	monClk := clocktesting.NewFakeClock(time.Now())
	mon := natsserver.NewLogMonitor(c.Servers[li].Embedded, health, natsserver.LogMonitorOptions{Every: time.Second, Clock: monClk, Stream: "CLAIMSTREAM", Logger: logger})
	monDone := make(chan struct{})
	mctx, mcancel := context.WithCancel(ctx)
	go func() { mon.Run(mctx); close(monDone) }()
	defer func() { mcancel(); <-monDone }()
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		monClk.Step(time.Second)
		if s := health.Status(); !s.Writable {
			return fmt.Errorf("log status %+v", s)
		}
		return nil
	})

	st, err := eventlog.OpenStore(ctx, c.JetStream(li), eventlog.StoreConfig{Replicas: 3, AnswerWait: 300 * time.Millisecond, OutcomeWait: time.Second, Health: health, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	views := projections.NewRunner(st, projections.RunnerOptions{Logger: logger})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	viewsDone := make(chan error, 1)
	go func() { viewsDone <- views.Run(ctx) }()
	defer func() { cancel(); <-viewsDone }()
	clk := clocktesting.NewFakeClock(handlerstest.Start)
	svc := handlers.NewService(st, views, clk, "/claimstream/test", logger)
	declareOn(t, st, views, clk.Now(), "g", handlerstest.Slots("g", 4)...)
	last, err := st.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.WaitStreamStored("CLAIMSTREAM", last)

	stopped := c.StopOthers(li)
	cmd := decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca", RequestKey: "trace 4bf92f3577b34da6a3ce929d0e0e4736 g +1"}
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	began := time.Now()
	_, err = svc.Execute(actx, cmd)
	took := time.Since(began)
	acancel()
	if err != nil && (!errors.Is(err, eventlog.ErrOutcomeUnknown) || decide.CodeOf(err) != 0 || errors.Is(err, eventlog.ErrLogUnwritable)) {
		t.Fatalf("IncreaseSize whose quorum was lost after the publish: %v (code %v), want success or outcome unknown\n%s", err, decide.CodeOf(err), logs)
	}
	if s := health.Status(); s.Writable {
		t.Fatalf("the monitor never saw the quorum lost: the append met no fault")
	}
	t.Logf("first answer after %v: %v", took.Round(time.Millisecond), err)

	for _, i := range stopped {
		c.Start(i)
	}
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		monClk.Step(time.Second)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		_, err := svc.Execute(rctx, cmd)
		return err
	})
	// Reads right after replicas rejoin get tries of AnswerWait until their
	// deadline (a read without one gets three: under 1s here).
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	last, err = st.LastSeq(rctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := views.WaitFor(rctx, last); err != nil {
		t.Fatal(err)
	}
	var target int
	views.Read(func(s *projections.State) { target = s.TargetSize("g") })
	created := 0
	if err := st.Read(rctx, 1, 0, func(e events.Event) error {
		if _, ok := e.Data.(events.ClaimCreated); ok {
			created++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if target != 1 || created != 1 {
		t.Fatalf("target size %d, %d ClaimCreated after a request and its retries; want 1 and 1", target, created)
	}
}

// declareOn writes a group of slots to st and waits for views.
func declareOn(t *testing.T, st *eventlog.Store, views *projections.Runner, now time.Time, group string, slots ...string) {
	t.Helper()
	ws := []events.Write{{Aggregate: events.GroupAggregate(group), Events: []events.Event{{Time: now, Data: events.GroupDeclared{
		Ref: events.Ref{Group: group, Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}}}}}}
	for _, sl := range slots {
		ws = append(ws, events.Write{Aggregate: events.SlotAggregate(sl), Events: []events.Event{{Time: now, Data: events.SlotDeclared{
			Ref: events.Ref{Slot: sl, Group: group, Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + sl}}}}})
	}
	res, err := st.AppendWrites(context.Background(), ws...)
	if err != nil {
		t.Fatalf("declare %s: %v", group, err)
	}
	if err := views.WaitFor(context.Background(), res.Last); err != nil {
		t.Fatal(err)
	}
}
