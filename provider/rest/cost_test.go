package rest_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// GET /api/v1/cost folds the log: a machine on for two hours at 100 W, at
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
