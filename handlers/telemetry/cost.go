package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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

	mu      sync.Mutex
	fold    *cost.Fold // nil until the history is folded
	seq     uint64
	pending []events.Event
	clk     clock.PassiveClock
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

// ObserveCost folds the log's history into the cost counters in the
// background, then every event the views fold. clk is the plane's clock:
// a machine still up counts until its now.
func (m *Metrics) ObserveCost(ctx context.Context, store *events.Store, views *projections.Runner, clk clock.PassiveClock, log *slog.Logger) {
	c := &m.cost
	c.clk = clk
	views.Subscribe(func(e events.Event) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.fold == nil {
			c.pending = append(c.pending, e)
			return
		}
		if e.Seq > c.seq {
			c.fold.Apply(e)
			c.seq = e.Seq
		}
	})
	go func() {
		f := cost.NewFold(cost.BySlot, time.Time{}, time.Time{})
		var seq uint64
		err := store.Read(ctx, 1, 0, func(e events.Event) error {
			f.Apply(e)
			seq = e.Seq
			return nil
		})
		if err != nil && ctx.Err() == nil {
			// The counters then lack the history they could not read: say so.
			log.Error("cost metrics: reading the log's history failed; the cost counters count from the events read", "err", err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range c.pending {
			if e.Seq > seq {
				f.Apply(e)
				seq = e.Seq
			}
		}
		c.fold, c.seq, c.pending = f, seq, nil
	}()
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
	c.mu.Lock()
	if c.fold != nil {
		for _, t := range c.fold.SlotTotals(c.clk.Now().UTC()) {
			up[slotKey{t.Group, t.Slot}] += t.UpSeconds
			energy[t.Group] += t.Joules
			money[groupKey{t.Group, t.Currency}] += t.Cost
		}
	}
	c.mu.Unlock()
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
