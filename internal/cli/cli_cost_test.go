package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// cost of a period in progress: without --forecast, what happened until
// now and a line saying it was cut there, no forecast; with it, the
// forecast apart, under a heading that says it is one (table and CSV).
func TestCostCLIForecastOnlyWhenAsked(t *testing.T) {
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
	period := []string{"cost", "--since", start.Format(time.RFC3339), "--until", start.Add(24 * time.Hour).Format(time.RFC3339), "--by", "slot"}
	plain := runCLI(t, f, period...)
	if strings.Contains(plain, "FORECAST") || !strings.Contains(plain, "cut at now") || !strings.Contains(plain, "n1") {
		t.Fatalf("cost of a period in progress:\n%s", plain)
	}
	withFC := runCLI(t, f, append(period, "--forecast")...)
	head, fc, ok := strings.Cut(withFC, "FORECAST to ")
	if !ok || head != plain+"\n" || !strings.Contains(fc, "a forecast, not what happened") || !strings.Contains(fc, "24.000") {
		t.Fatalf("cost --forecast:\n%s", withFC)
	}
	csv := runCLI(t, f, append(period, "--forecast", "-o", "csv")...)
	if !strings.Contains(csv, "\nforecast:n1,24,") || !strings.Contains(csv, "\nn1,2,") {
		t.Fatalf("cost --forecast -o csv:\n%s", csv)
	}
	ended := runCLI(t, f, "cost", "--since", start.Format(time.RFC3339), "--until", start.Add(time.Hour).Format(time.RFC3339), "--forecast")
	if !strings.Contains(ended, "error: ") || !strings.Contains(ended, "nothing to forecast") {
		t.Fatalf("cost --forecast of a period that ended:\n%s", ended)
	}
}
