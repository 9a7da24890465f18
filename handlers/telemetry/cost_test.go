package telemetry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
)

// The cost counters: present at 0 for every group and slot, then the
// history folded in the background and every new event on top; a machine
// still up counts until now.
func TestCostCountersOnTheScrapeEndpoint(t *testing.T) {
	h := handlerstest.New(t)
	tel := setup(t, telemetry.Options{Prometheus: true})
	p := func(v float64) *float64 { return &v }
	h.Declare("lab", events.GroupSpec{Cost: &events.Cost{PricePerHour: p(1), PowerWatts: p(100), EnergyPricePerKWh: p(0.30), Currency: "EUR"}}, "a", "b")
	power := func(slot string, on bool) {
		t.Helper()
		var seq uint64
		h.Read(func(s *projections.State) { seq = s.Slots[slot].Seq })
		now := h.Clock.Now().UTC()
		ref := events.Ref{Slot: slot, Group: "lab", Cause: "test"}
		var d events.Data = events.MachinePoweredOn{Ref: ref, Node: slot, At: now, AtSource: events.AtObserved}
		if !on {
			d = events.MachinePoweredOff{Ref: ref, Node: slot, At: now, AtSource: events.AtObserved, Reason: events.PowerOffNotReady}
		}
		res, err := h.Store.Append(context.Background(), events.SlotAggregate(slot), seq, events.Event{Time: now, Data: d})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Views.WaitFor(context.Background(), res.Last); err != nil {
			t.Fatal(err)
		}
	}
	tel.Metrics.ObserveViews(h.Views)
	// Before anything ran: every series at 0.
	body := scrape(t, tel)
	for _, line := range []string{
		`claimstream_machine_up_seconds_total{group="lab",slot="a"} 0`,
		`claimstream_machine_up_seconds_total{group="lab",slot="b"} 0`,
		`claimstream_energy_joules_total{group="lab"} 0`,
		`claimstream_cost_total{currency="EUR",group="lab"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q:\n%s", line, grepLines(body, "claimstream_"))
		}
	}

	power("a", true) // history: written before the counters start
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tel.Metrics.ObserveCost(ctx, h.Store, h.Views, h.Clock, quiet)
	h.Clock.Step(time.Hour)
	power("a", false)
	power("b", true)
	h.Clock.Step(30 * time.Minute) // b is still up: it counts until now

	// 5400 machine-seconds at 100 W: 540000 J; 1.5 h at 1 EUR plus 0.15 kWh at 0.30.
	want := []string{
		`claimstream_machine_up_seconds_total{group="lab",slot="a"} 3600`,
		`claimstream_machine_up_seconds_total{group="lab",slot="b"} 1800`,
		`claimstream_energy_joules_total{group="lab"} 540000`,
		fmt.Sprintf(`claimstream_cost_total{currency="EUR",group="lab"} %g`, 1.5+0.15*0.30),
	}
	eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		body := scrape(t, tel)
		for _, line := range want {
			if !strings.Contains(body, line+"\n") {
				return fmt.Errorf("scrape lacks %q:\n%s", line, grepLines(body, "claimstream_"))
			}
		}
		return nil
	})
}
