package telemetry

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
)

// Instruments of the cost accounting (docs/cost.md). They count over the
// whole log, so a restart does not reset them; every group and slot of the
// views is reported, at 0 until its machine has run.
const (
	// claimstream_machine_up_seconds_total{group,slot}: seconds the slot's
	// machine was up (between its power facts).
	InstMachineUp = "claimstream_machine_up"
	// claimstream_energy_joules_total{group}: energy the group's machines
	// drew up and booting.
	InstEnergy = "claimstream_energy"
	// claimstream_cost_total{group,currency}: what they cost.
	InstCost = "claimstream_cost"
)

type costInstruments struct {
	up     metric.Float64ObservableCounter
	energy metric.Float64ObservableCounter
	cost   metric.Float64ObservableCounter

	totals atomic.Pointer[costSource]
}

// CostTotals is where the cost counters take their figures: serve's cost
// index (projections/cost Runner), which reads the log once for both the
// cost report and the counters. SlotTotals is false while it is being
// built.
type CostTotals interface {
	SlotTotals(end time.Time) ([]cost.SlotTotal, bool)
}

type costSource struct {
	totals CostTotals
	clk    clock.PassiveClock
}

func (m *Metrics) newCostInstruments(meter metric.Meter) error {
	c := &m.cost
	var err1, err2, err3 error
	c.up, err1 = meter.Float64ObservableCounter(InstMachineUp, metric.WithUnit("s"),
		metric.WithDescription("Seconds a slot's machine was up, from the log's power facts (MachinePoweredOn/Off)."))
	c.energy, err2 = meter.Float64ObservableCounter(InstEnergy, metric.WithUnit("J"),
		metric.WithDescription("Energy a group's machines drew while up and booting (powerWatts, bootWatts)."))
	c.cost, err3 = meter.Float64ObservableCounter(InstCost,
		metric.WithDescription("What a group's machines cost while up and booting (pricePerHour and energy at energyPricePerKWh), in its currency."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	_, err := meter.RegisterCallback(m.observeCost, c.up, c.energy, c.cost)
	return err
}

// ObserveCost takes the cost counters' figures from totals at every
// scrape. clk is the plane's clock: a machine still up counts until its
// now. Until totals has read the log's history the counters stay at 0.
func (m *Metrics) ObserveCost(totals CostTotals, clk clock.PassiveClock) {
	m.cost.totals.Store(&costSource{totals: totals, clk: clk})
}

func (m *Metrics) observeCost(_ context.Context, o metric.Observer) error {
	v := m.views.Load()
	if v == nil {
		return nil
	}
	type slotKey struct{ group, slot string }
	type groupKey struct{ group, currency string }
	up := map[slotKey]float64{}
	energy := map[string]float64{}
	money := map[groupKey]float64{}
	// Every group and slot of the views, at 0 until counted.
	v.Read(func(s *projections.State) {
		for name, g := range s.Groups {
			if g.Retired {
				continue
			}
			energy[name] += 0
			money[groupKey{name, events.EffectiveCost(g.Spec, nil).Currency}] += 0
		}
		for name, sl := range s.Slots {
			if !sl.Retired && sl.Group != "" {
				up[slotKey{sl.Group, name}] += 0
			}
		}
	})
	c := &m.cost
	if src := c.totals.Load(); src != nil {
		totals, _ := src.totals.SlotTotals(src.clk.Now().UTC())
		for _, t := range totals {
			up[slotKey{t.Group, t.Slot}] += t.UpSeconds
			energy[t.Group] += t.Joules
			money[groupKey{t.Group, t.Currency}] += t.Cost
		}
	}
	for k, s := range up {
		o.ObserveFloat64(c.up, s, metric.WithAttributes(attribute.String("group", k.group), attribute.String("slot", k.slot)))
	}
	for g, j := range energy {
		o.ObserveFloat64(c.energy, j, metric.WithAttributes(attribute.String("group", g)))
	}
	for k, x := range money {
		o.ObserveFloat64(c.cost, x, metric.WithAttributes(attribute.String("group", k.group), attribute.String("currency", k.currency)))
	}
	return nil
}
