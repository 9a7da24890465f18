package pool

import (
	"context"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
)

// A change of a group's price or a slot's power draw in the pool file is a
// GroupChanged / SlotChanged carrying the new cost, so a report over a
// period prices each instant with the prices then in force.
func TestCostChangesAreEvents(t *testing.T) {
	h := handlerstest.New(t)
	a := applier(h)
	file := func(price, watts string) *Config {
		cfg, err := Parse("pool.yaml", []byte(`groups:
  - name: g
    cost: {pricePerHour: `+price+`, powerWatts: 65, currency: EUR}
slots:
  - name: s
    group: g
    cost: {powerWatts: `+watts+`}
`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ctx := context.Background()
	if _, err := a.Apply(ctx, file("0.10", "100")); err != nil {
		t.Fatal(err)
	}
	from := lastSeq(t, h)
	if _, err := a.Apply(ctx, file("0.25", "150")); err != nil {
		t.Fatal(err)
	}
	var groupPrice, slotWatts float64
	err := h.Store.Read(ctx, from+1, 0, func(e events.Event) error {
		switch d := e.Data.(type) {
		case events.GroupChanged:
			groupPrice = events.Num(d.Spec.Cost.PricePerHour)
		case events.SlotChanged:
			slotWatts = events.Num(d.Spec.Cost.PowerWatts)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if groupPrice != 0.25 || slotWatts != 150 {
		t.Fatalf("GroupChanged price %g, SlotChanged watts %g; want 0.25 and 150", groupPrice, slotWatts)
	}
}

// The older template.pricing.nodePerHour is the group's price per hour when
// cost.pricePerHour is absent, in the currency XXX (none named).
func TestNodePerHourIsThePricePerHour(t *testing.T) {
	cfg, err := Parse("pool.yaml", []byte("groups:\n  - name: g\n    template: {pricing: {nodePerHour: 0.35}}\nslots: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := events.EffectiveCost(cfg.Groups[0].Spec, nil)
	if events.Num(c.PricePerHour) != 0.35 || c.Currency != events.NoCurrency {
		t.Fatalf("cost %+v, want pricePerHour 0.35 in XXX", c)
	}
}
