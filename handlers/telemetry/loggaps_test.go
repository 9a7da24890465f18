package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
)

// A log that lost the declaration of slot s1 (flipped bytes, seq 3) while
// a claim on s1 (seq 4) survived: the scrape shows the missing sequence,
// the claim the model refused for want of its slot, and no lag.
func TestScrapeShowsMissingSequencesAndRefusedEvents(t *testing.T) {
	srv, st, t0 := logWithGroup(t, "g")
	ctx := context.Background()
	for _, s := range []string{"s0", "s1"} {
		if _, err := st.Append(ctx, events.SlotAggregate(s), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: s, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + s}}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := events.ClaimCreated{
		Ref:         events.Ref{Claim: "c1", Slot: "s1", Group: "g", Attempt: 1, Cause: "test"},
		RequestedAt: t0, RequestedBy: "test", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"},
		DeadlineAt: t0.Add(12 * time.Minute), Budget: events.Duration(12 * time.Minute), TTL: events.Duration(time.Hour),
	}
	if _, err := st.Append(ctx, events.SlotAggregate("s1"), 3, events.Event{Time: t0, Data: claim}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.FlipBlockBytes("CLAIMSTREAM", []byte("cs.slot.s1.SlotDeclared"), 40)
	srv.Start()
	st = srv.Store()

	tel := setup(t, telemetry.Options{Prometheus: true})
	views := projections.NewRunner(st, projections.RunnerOptions{OnEvent: tel.Metrics.OnEvent, Logger: quiet})
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := views.Start(sctx); err != nil {
		t.Fatal(err)
	}
	tel.Metrics.ObserveViews(views)
	body := scrape(t, tel)
	for _, line := range []string{
		`claimstream_log_missing_events 1`,
		`claimstream_events_refused_total 1`,
		`claimstream_projection_lag_events 0`,
		`claimstream_views_direct_read_events_total 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// logWithGroup starts a real server whose log holds one declared group.
func logWithGroup(t *testing.T, group string) (*eventstest.Server, *eventlog.Store, time.Time) {
	t.Helper()
	srv := eventstest.StartServer(t)
	st := srv.Store()
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	decl := events.GroupDeclared{Ref: events.Ref{Group: group, Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}}
	if _, err := st.Append(context.Background(), events.GroupAggregate(group), 0, events.Event{Time: t0, Data: decl}); err != nil {
		t.Fatal(err)
	}
	return srv, st, t0
}
