package telemetry_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
)

// The cost counters: present at 0 for every group and slot, then the cost
// index's totals (the history read in the background, every new event on
// top); a machine still up counts until now.
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

	power("a", true) // history: written before the cost index starts
	runCostIndex(t, tel, h)
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

// runCostIndex runs serve's cost index over h's log for the test's life and
// has tel's cost counters read it.
func runCostIndex(t *testing.T, tel *telemetry.Telemetry, h *handlerstest.Harness) *cost.Runner {
	t.Helper()
	x, err := cost.NewRunner(context.Background(), h.Views, h.Store, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tel.Metrics.ObserveCost(x, h.Clock)
	tel.Metrics.ObserveIndexHistory("cost", x)
	return x
}

// scrapedValues is the value of every sample of the scrape whose name has
// prefix, by its line's name and labels.
func scrapedValues(t *testing.T, body, prefix string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// The counters are the whole log's fold by slot (cost.NewFold(BySlot)) until
// the clock's now: the history written before the index ran and the events
// after it, over two groups in two currencies, machines powered on and off
// and one still up. A machine's seconds are the fold's to the last bit.
func TestCostCountersEqualTheFoldOfTheLog(t *testing.T) {
	h := handlerstest.New(t)
	tel := setup(t, telemetry.Options{Prometheus: true})
	tel.Metrics.ObserveViews(h.Views)
	p := func(v float64) *float64 { return &v }
	h.Declare("lab", events.GroupSpec{Cost: &events.Cost{PricePerHour: p(1.1), PowerWatts: p(95), EnergyPricePerKWh: p(0.31), Currency: "EUR"}}, "a", "b")
	h.Declare("gpu", events.GroupSpec{Cost: &events.Cost{PricePerHour: p(2.7), PowerWatts: p(410), EnergyPricePerKWh: p(0.17), Currency: "USD"}}, "c")
	on := map[string]bool{}
	power := func(slot, group string, step time.Duration) {
		t.Helper()
		h.Clock.Step(step)
		var seq uint64
		h.Read(func(s *projections.State) { seq = s.Slots[slot].Seq })
		now := h.Clock.Now().UTC()
		ref := events.Ref{Slot: slot, Group: group, Cause: "test"}
		var d events.Data = events.MachinePoweredOn{Ref: ref, Node: slot, At: now.Add(-7 * time.Second), AtSource: events.AtObserved}
		if on[slot] {
			d = events.MachinePoweredOff{Ref: ref, Node: slot, At: now, AtSource: events.AtObserved, Reason: events.PowerOffNotReady}
		}
		on[slot] = !on[slot]
		res, err := h.Store.Append(context.Background(), events.SlotAggregate(slot), seq, events.Event{Time: now, Data: d})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Views.WaitFor(context.Background(), res.Last); err != nil {
			t.Fatal(err)
		}
	}
	power("a", "lab", 0)
	power("c", "gpu", 13*time.Minute)
	power("a", "lab", 47*time.Minute+300*time.Millisecond)
	x := runCostIndex(t, tel, h)
	power("b", "lab", 5*time.Minute)
	power("a", "lab", time.Second)
	power("c", "gpu", 3*time.Hour+17*time.Second)
	power("b", "lab", 19*time.Minute)
	h.Clock.Step(23 * time.Minute) // a is still up

	// The fold of the whole log, as the counters had it before the index.
	f := cost.NewFold(cost.BySlot, time.Time{}, time.Time{})
	if err := h.Store.Read(context.Background(), 1, 0, func(e events.Event) error { f.Apply(e); return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	for _, s := range f.SlotTotals(h.Clock.Now().UTC()) {
		want[fmt.Sprintf(`claimstream_machine_up_seconds_total{group=%q,slot=%q}`, s.Group, s.Slot)] += s.UpSeconds
		want[fmt.Sprintf(`claimstream_energy_joules_total{group=%q}`, s.Group)] += s.Joules
		want[fmt.Sprintf(`claimstream_cost_total{currency=%q,group=%q}`, s.Currency, s.Group)] += s.Cost
	}
	if len(want) != 7 {
		t.Fatalf("the fold has %d series, want 3 slots, 2 groups' energy and cost: %v", len(want), want)
	}
	// No chunk of spans is full in so short a log: none on disk, none
	// held in memory for a disk that refused it.
	want[`claimstream_index_history_bytes{held="disk",index="cost"}`] = 0
	want[`claimstream_index_history_bytes{held="memory",index="cost"}`] = 0
	eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, built := x.SlotTotals(h.Clock.Now()); !built {
			return fmt.Errorf("cost index not built yet")
		}
		got := scrapedValues(t, scrape(t, tel), "claimstream_")
		for name, w := range want {
			g, ok := got[name]
			switch {
			case !ok:
				return fmt.Errorf("scrape lacks %s", name)
			case strings.HasPrefix(name, "claimstream_machine_up") && g != w:
				return fmt.Errorf("%s = %v, the fold's is %v", name, g, w)
			case math.Abs(g-w) > 1e-9*math.Abs(w):
				// A group's sum over its slots: their order may differ.
				return fmt.Errorf("%s = %v, the fold's is %v", name, g, w)
			}
		}
		return nil
	})
}
