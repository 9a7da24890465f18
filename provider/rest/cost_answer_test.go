package rest

import (
	"context"
	"encoding/json"
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

// While the views, and the cost index with them, are built, GET
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
	clk := clocktesting.NewFakeClock(t0.Add(24 * time.Hour))
	x, err := cost.NewRunner(ctx, views, st, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	api := New(views, handlers.NewService(st, views, clk, "/test", nil), st, clk, Options{NoAuth: true, Cost: x})
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cost?since=2d", nil))
		return rec
	}

	// Before the views (and the index with them) are built.
	rec := get()
	var body ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || body.Code != "Unavailable" ||
		!strings.Contains(body.Error, "cost index is being built") {
		t.Fatalf("before the views' start: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	// How far the fold is, as the answer says it.
	rec = httptest.NewRecorder()
	s := &server{}
	if !s.answerCostIndex(rec, httptest.NewRequest("GET", "/api/v1/cost?since=2d", nil), &cost.BuildingError{Folded: 1, Of: 4}) {
		t.Fatal("the building error was not answered")
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if !strings.Contains(body.Error, "1 of 4 events folded, 25%") {
		t.Fatalf("while building: %s", rec.Body.String())
	}

	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cancel()
	rec = get()
	if !strings.Contains(rec.Body.String(), `"key":"g","currency":"EUR","machineHours":3,`) {
		t.Fatalf("built: %s", rec.Body.String())
	}
}

// A cost index that cannot keep its history on disk holds it in memory:
// /readyz stays ready and says why, and the report is answered.
func TestReadyzSaysTheCostHistoryIsInMemory(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	if _, err := st.Append(ctx, events.GroupAggregate("g"), 0, events.Event{Time: t0, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}}}); err != nil {
		t.Fatal(err)
	}
	views := projections.NewRunner(st, projections.RunnerOptions{})
	clk := clocktesting.NewFakeClock(t0.Add(time.Hour))
	gone := t.TempDir() + "/gone"
	x, err := cost.NewRunner(ctx, views, st, gone)
	if err != nil {
		t.Fatal(err)
	}
	api := New(views, handlers.NewService(st, views, clk, "/test", nil), st, clk, Options{NoAuth: true, Cost: x})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	rec := get("/readyz")
	var h Health
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || h.Status != "ready" || !strings.Contains(h.History, "holds 0.0 MB of its history in memory") || !strings.Contains(h.History, gone) {
		t.Fatalf("readyz: %d %s", rec.Code, rec.Body.String())
	}
	if rec := get("/api/v1/cost?since=2d"); rec.Code != http.StatusOK {
		t.Fatalf("the report: %d %s", rec.Code, rec.Body.String())
	}
}
