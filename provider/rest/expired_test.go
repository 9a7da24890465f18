package rest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
)

// An audit of a claim whose first events expired says so, with the state
// the checkpoint holds, before the events still in the log; a replay to a
// point before the log's first event is refused as expired, one after it
// starts from the checkpoint.
func TestAuditAndReplayOfExpiredHistory(t *testing.T) {
	srv := eventstest.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{MaxAge: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cps, err := projections.OpenCheckpoints(ctx, js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	r := events.Ref{Claim: "a-000001", Slot: "a", Group: "g", Attempt: 1, Cause: "minSize"}
	for _, d := range []events.Data{
		events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}},
		events.SlotDeclared{Ref: events.Ref{Slot: "a", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://a"}},
	} {
		if _, err := st.Append(ctx, events.AggregateOf(d), 0, events.Event{Time: now, Data: d}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 2,
		events.Event{Time: now, Data: events.ClaimCreated{Ref: r, RequestedAt: now, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"}, DeadlineAt: now.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)}},
		events.Event{Time: now, Data: events.ClaimBooting{Ref: r, StartupJob: r.Claim + "-start-1"}},
		events.Event{Time: now, Data: events.ClaimReady{Ref: r, Node: "a"}},
	); err != nil {
		t.Fatal(err)
	}
	views := projections.NewRunner(st, projections.RunnerOptions{Checkpoints: cps, CheckpointPolicy: projections.CheckpointPolicy{Every: 1000}, Logger: slog.New(slog.DiscardHandler)})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := views.CheckpointNow(ctx); err != nil { // seq 5
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- views.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := st.Bounds(ctx)
		if err != nil || b.First < 6 {
			return fmt.Errorf("log starts at %d (%v)", b.First, err)
		}
		return nil
	})
	later := time.Now().UTC()
	res, err := st.Append(ctx, events.SlotAggregate("a"), 5, events.Event{Time: later, Data: events.ScaleDownRequested{Ref: r, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Group: "g", Nodes: []string{"a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := views.WaitFor(ctx, res.Last); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(later)
	api := rest.New(views, handlers.NewService(st, views, clk, "/test", slog.New(slog.DiscardHandler)), st, clk, rest.Options{NoAuth: true})
	hs := httptest.NewServer(api)
	defer hs.Close()
	c := &rest.Client{BaseURL: hs.URL}

	a, err := c.AuditClaim(ctx, r.Claim, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Lines) != 2 {
		t.Fatalf("audit lines %+v, want the expiry and the scale-down", a.Lines)
	}
	for _, want := range []string{"history expired", "before seq 6", "last known state from checkpoint at seq 5", "ready on slot a"} {
		if !strings.Contains(a.Lines[0].Text, want) {
			t.Errorf("first audit line %q does not say %q", a.Lines[0].Text, want)
		}
	}
	if a.Lines[1].Seq != res.Last || a.Group != "g" {
		t.Errorf("audit %+v: want the scale-down at seq %d after the expiry, group g", a, res.Last)
	}

	// A collected claim of the expired past is not in the log nor the
	// checkpoint: the answer says its history expired.
	_, err = c.AuditClaim(ctx, "a-0000ff", "a")
	if err == nil || !strings.Contains(err.Error(), "history expired") || !strings.Contains(err.Error(), "does not hold the claim") {
		t.Fatalf("audit of an expired, collected claim: %v", err)
	}

	rep, err := c.ReplaySeq(ctx, res.Last)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Claims) != 1 || rep.Claims[0].Phase != projections.PhaseReady {
		t.Fatalf("replay after the expiry: %+v, want the always-on claim ready", rep.Claims)
	}
	if _, err := c.ReplaySeq(ctx, 3); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("replay to an expired seq: %v, want refused as expired", err)
	}
	if _, err := c.ReplayAt(ctx, now.Add(-time.Hour)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("replay to an instant before every checkpoint: %v, want refused as expired", err)
	}
}
