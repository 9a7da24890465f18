package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// GET /api/v1/cost reports from the cost index: a machine on for two hours at 100 W, at
// 0.30 EUR/kWh and 0.05 EUR/h, is 2 machine-hours, 0.2 kWh, 0.16 EUR.
func TestCostEndpoint(t *testing.T) {
	f := resttest.Start(t)
	p := func(v float64) *float64 { return &v }
	f.H.Declare("lab", events.GroupSpec{Cost: &events.Cost{PricePerHour: p(0.05), PowerWatts: p(100), EnergyPricePerKWh: p(0.30), Currency: "EUR"}}, "n1")
	start := f.H.Clock.Now().UTC()
	power := func(d events.Data) {
		t.Helper()
		var seq uint64
		f.H.Read(func(s *projections.State) { seq = s.Slots["n1"].Seq })
		res, err := f.H.Store.Append(context.Background(), events.SlotAggregate("n1"), seq, events.Event{Time: f.H.Clock.Now().UTC(), Data: d})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.H.Views.WaitFor(context.Background(), res.Last); err != nil {
			t.Fatal(err)
		}
	}
	ref := events.Ref{Slot: "n1", Group: "lab", Cause: "test"}
	power(events.MachinePoweredOn{Ref: ref, Node: "n1", At: start, AtSource: events.AtObserved})
	f.H.Clock.Step(2 * time.Hour)
	power(events.MachinePoweredOff{Ref: ref, Node: "n1", At: start.Add(2 * time.Hour), AtSource: events.AtObserved, Reason: events.PowerOffNotReady})

	rep, err := f.Client.Cost(context.Background(), url.Values{"since": {"1d"}, "by": {"slot"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 {
		t.Fatalf("rows %+v", rep.Rows)
	}
	r := rep.Rows[0]
	if r.Key != "n1" || r.Currency != "EUR" || r.MachineHours != 2 || r.KWh != 0.2 || r.Cost != 0.16 || r.UnwantedHours["no-claim"] != 2 || r.UnwantedShare != 1 {
		t.Fatalf("row %+v, want n1 EUR 2h 0.2kWh 0.16", r)
	}

	for q, want := range map[string]string{
		"by=team":                "by",
		"month=2026-13":          "YYYY-MM",
		"since=2h&until=3h":      "not before",
		"month=2026-11&since=1d": "not both",
		"since=yesterday":        "RFC 3339",
	} {
		v, _ := url.ParseQuery(q)
		_, err := f.Client.Cost(context.Background(), v)
		var ae *rest.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a 400 naming %q", q, err, want)
		}
	}
}

// The report is live: each request reflects every event appended before
// it (the index folds what it has not seen first), an open interval
// counting until the period's end.
func TestCostReportReflectsNewEvents(t *testing.T) {
	f := resttest.Start(t)
	p := func(v float64) *float64 { return &v }
	f.H.Declare("lab", events.GroupSpec{Cost: &events.Cost{PricePerHour: p(1), Currency: "EUR"}}, "n1")
	ref := events.Ref{Slot: "n1", Group: "lab", Cause: "test"}
	appendPower := func(d events.Data) {
		t.Helper()
		var seq uint64
		f.H.Read(func(s *projections.State) { seq = s.Slots["n1"].Seq })
		if _, err := f.H.Store.Append(context.Background(), events.SlotAggregate("n1"), seq, events.Event{Time: f.H.Clock.Now().UTC(), Data: d}); err != nil {
			t.Fatal(err)
		}
	}
	hours := func() float64 {
		t.Helper()
		rep, err := f.Client.Cost(context.Background(), url.Values{"since": {"1d"}, "by": {"slot"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) == 0 {
			return 0
		}
		return rep.Rows[0].MachineHours
	}
	if h := hours(); h != 0 {
		t.Fatalf("before any power fact: %v machine-hours", h)
	}
	appendPower(events.MachinePoweredOn{Ref: ref, Node: "n1", At: f.H.Clock.Now().UTC(), AtSource: events.AtObserved})
	f.H.Clock.Step(time.Hour)
	if h := hours(); h != 1 {
		t.Fatalf("up for an hour, still up: %v machine-hours, want 1", h)
	}
	f.H.Clock.Step(time.Hour)
	appendPower(events.MachinePoweredOff{Ref: ref, Node: "n1", At: f.H.Clock.Now().UTC(), AtSource: events.AtObserved, Reason: events.PowerOffNotReady})
	f.H.Clock.Step(time.Hour)
	if h := hours(); h != 2 {
		t.Fatalf("up two hours, then off: %v machine-hours, want 2", h)
	}
	appendPower(events.MachinePoweredOn{Ref: ref, Node: "n1", At: f.H.Clock.Now().UTC(), AtSource: events.AtObserved})
	f.H.Clock.Step(30 * time.Minute)
	if h := hours(); h != 2.5 {
		t.Fatalf("up again for half an hour: %v machine-hours, want 2.5", h)
	}
}

// A log with missing sequences is refused (412), naming them: the report
// would lack their power facts.
func TestCostOverADamagedLogIsRefused(t *testing.T) {
	h := apiOverAGap(t, true)
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httptestRequest("GET", "/api/v1/cost?since=2026-03-01T00:00:00Z&until=2026-03-05T00:00:00Z"))
	var body rest.ErrorBody
	_ = json.Unmarshal(rec.body.Bytes(), &body)
	if rec.status != http.StatusPreconditionFailed || body.Code != "FailedPrecondition" || !strings.Contains(body.Error, "damaged log") || !strings.Contains(body.Error, "sequence 10 is missing") {
		t.Fatalf("cost over a gap: %d %s", rec.status, rec.body.String())
	}
}

// A log whose start expired, with no checkpoint holding the cost index, is
// refused (410): a machine's state at the period's start came from events
// that are gone.
func TestCostOverAnExpiredLogIsGone(t *testing.T) {
	srv := eventstest.StartServer(t)
	ctx := context.Background()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{MaxAge: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	declare := func(name string) {
		t.Helper()
		if _, err := st.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}}}); err != nil {
			t.Fatal(err)
		}
	}
	declare("s0")
	declare("s1")
	// The views of the first two events, kept in a checkpoint by views
	// that folded no cost index.
	cps, err := projections.OpenCheckpoints(ctx, js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	before := projections.NewRunner(st, projections.RunnerOptions{Checkpoints: cps})
	if err := before.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := before.CheckpointNow(ctx); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := st.Bounds(ctx)
		if err != nil || b.First < 3 {
			return fmt.Errorf("log starts at %d (%v)", b.First, err)
		}
		return nil
	})
	declare("s2")
	views := projections.NewRunner(st, projections.RunnerOptions{Checkpoints: cps})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	h := rest.New(views, handlers.NewService(st, views, clk, "/test", nil), st, clk, rest.Options{NoAuth: true})
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httptestRequest("GET", "/api/v1/cost?since=1d"))
	var body rest.ErrorBody
	_ = json.Unmarshal(rec.body.Bytes(), &body)
	if rec.status != http.StatusGone || body.Code != "Expired" || !strings.Contains(body.Error, "starts at seq 3") {
		t.Fatalf("cost over an expired log start: %d %s", rec.status, rec.body.String())
	}
}

// TestCostIsNotChargedForHoursToCome: a machine on for two hours and
// still on, in a month in progress or a period asked to end a year ahead,
// is charged the two hours until now, and the report says it was cut at
// now; a period that starts after now is refused.
func TestCostIsNotChargedForHoursToCome(t *testing.T) {
	f := resttest.Start(t)
	f.H.Declare("lab", events.GroupSpec{}, "n1")
	start := f.H.Clock.Now().UTC()
	var seq uint64
	f.H.Read(func(s *projections.State) { seq = s.Slots["n1"].Seq })
	res, err := f.H.Store.Append(context.Background(), events.SlotAggregate("n1"), seq, events.Event{Time: start, Data: events.MachinePoweredOn{Ref: events.Ref{Slot: "n1", Group: "lab", Cause: "test"}, Node: "n1", At: start, AtSource: events.AtObserved}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.H.Views.WaitFor(context.Background(), res.Last); err != nil {
		t.Fatal(err)
	}
	f.H.Clock.Step(2 * time.Hour)
	now := f.H.Clock.Now().UTC()
	for _, q := range []url.Values{
		{"month": {start.Format("2006-01")}, "by": {"slot"}},
		{"since": {start.Format(time.RFC3339)}, "until": {now.AddDate(1, 0, 0).Format(time.RFC3339)}, "by": {"slot"}},
	} {
		rep, err := f.Client.Cost(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) != 1 || rep.Rows[0].MachineHours != 2 || !rep.Until.Equal(now) || rep.AskedUntil == nil || !rep.AskedUntil.After(now) {
			t.Errorf("%v: until %s asked %v rows %+v, want 2 machine-hours cut at now %s", q, rep.Until, rep.AskedUntil, rep.Rows, now)
		}
	}
	_, err = f.Client.Cost(context.Background(), url.Values{"since": {now.AddDate(1, 0, 0).Format(time.RFC3339)}, "until": {now.AddDate(1, 1, 0).Format(time.RFC3339)}})
	var apiErr *rest.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(apiErr.Msg, "nothing in it has happened yet") {
		t.Fatalf("a period a year ahead: %v", err)
	}
}

// TestCostForecastOnlyWhenAskedAndLabelled: a machine on for two hours of
// a period that ends 22 hours after now is charged the two hours; the
// forecast, only with forecast=true, carries it on to the end (24 hours),
// says it is a forecast, and leaves the report of what happened as it is.
// A forecast of a period that has ended is refused.
func TestCostForecastOnlyWhenAskedAndLabelled(t *testing.T) {
	f := resttest.Start(t)
	f.H.Declare("lab", events.GroupSpec{}, "n1")
	start := f.H.Clock.Now().UTC()
	var seq uint64
	f.H.Read(func(s *projections.State) { seq = s.Slots["n1"].Seq })
	res, err := f.H.Store.Append(context.Background(), events.SlotAggregate("n1"), seq, events.Event{Time: start, Data: events.MachinePoweredOn{Ref: events.Ref{Slot: "n1", Group: "lab", Cause: "test"}, Node: "n1", At: start, AtSource: events.AtObserved}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.H.Views.WaitFor(context.Background(), res.Last); err != nil {
		t.Fatal(err)
	}
	f.H.Clock.Step(2 * time.Hour)
	now := f.H.Clock.Now().UTC()
	end := start.Add(24 * time.Hour)
	q := url.Values{"since": {start.Format(time.RFC3339)}, "until": {end.Format(time.RFC3339)}, "by": {"slot"}}
	plain, err := f.Client.Cost(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Forecast != nil {
		t.Fatalf("a forecast nobody asked for: %+v", plain.Forecast)
	}
	q.Set("forecast", "true")
	rep, err := f.Client.Cost(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].MachineHours != 2 || !rep.Until.Equal(now) {
		t.Fatalf("with a forecast, the report of what happened changed: until %s rows %+v", rep.Until, rep.Rows)
	}
	fc := rep.Forecast
	if fc == nil || !strings.Contains(fc.Basis, "forecast") || !fc.Until.Equal(end) || len(fc.Rows) != 1 || fc.Rows[0].MachineHours != 24 {
		t.Fatalf("forecast %+v, want 24 machine-hours until %s, labelled a forecast", fc, end)
	}
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"forecast":{"basis":"a forecast, not what happened`) {
		t.Fatalf("the JSON answer does not label its forecast: %s", b)
	}
	_, err = f.Client.Cost(context.Background(), url.Values{"since": {start.Format(time.RFC3339)}, "until": {now.Add(-time.Minute).Format(time.RFC3339)}, "forecast": {"true"}})
	var apiErr *rest.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(apiErr.Msg, "nothing to forecast") {
		t.Fatalf("a forecast of a period that ended: %v", err)
	}
}
