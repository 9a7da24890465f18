package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
)

// While the cost index's first fold of the log is under way, GET
// /api/v1/cost answers 503 with Retry-After and how far the fold is
// (projections/cost refuses the report at once); once built, it answers
// the report.
func TestCostWhileTheIndexIsBuilt(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	p := func(v float64) *float64 { return &v }
	if _, err := st.Append(ctx, events.GroupAggregate("g"), 0, events.Event{Time: t0, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Cost: &events.Cost{PricePerHour: p(1), Currency: "EUR"}}}}); err != nil {
		t.Fatal(err)
	}
	ref := events.Ref{Slot: "s", Group: "g", Cause: "test"}
	if _, err := st.Append(ctx, events.SlotAggregate("s"), 0,
		events.Event{Time: t0, Data: events.SlotDeclared{Ref: ref}},
		events.Event{Time: t0, Data: events.MachinePoweredOn{Ref: ref, Node: "s", At: t0, AtSource: events.AtObserved}},
		events.Event{Time: t0.Add(3 * time.Hour), Data: events.MachinePoweredOff{Ref: ref, Node: "s", At: t0.Add(3 * time.Hour), AtSource: events.AtObserved, Reason: events.PowerOffNotReady}},
	); err != nil {
		t.Fatal(err)
	}
	views := projections.NewRunner(st, projections.RunnerOptions{})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0.Add(24 * time.Hour))
	x := cost.NewRunner(st, nil)
	api := New(views, handlers.NewService(st, views, clk, "/test", nil), st, clk, Options{NoAuth: true, Cost: x})
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cost?since=2d", nil))
		return rec
	}

	// The runner's refusal while its first pass is 1 event of 4 in.
	rec := httptest.NewRecorder()
	s := &server{}
	if !s.answerCostIndex(rec, httptest.NewRequest("GET", "/api/v1/cost?since=2d", nil), &cost.BuildingError{Folded: 1, Of: 4}) {
		t.Fatal("the building error was not answered")
	}
	var body ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || body.Code != "Unavailable" ||
		!strings.Contains(body.Error, "cost index is being built") || !strings.Contains(body.Error, "1 of 4 events folded, 25%") {
		t.Fatalf("while building: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}

	done := make(chan error, 1)
	go func() { done <- x.Run(ctx, views) }()
	t.Cleanup(func() { cancel(); <-done })
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if rec := get(); rec.Code != http.StatusOK {
			return fmt.Errorf("%d %s", rec.Code, rec.Body.String())
		}
		return nil
	})
	rec = get()
	if !strings.Contains(rec.Body.String(), `"key":"g","currency":"EUR","machineHours":3,`) {
		t.Fatalf("built: %s", rec.Body.String())
	}
}
