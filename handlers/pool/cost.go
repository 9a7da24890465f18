package pool

import (
	"encoding/json"
	"strconv"
)

// costs checks the prices and power draw of groups and slots (docs/cost.md)
// beyond the schema: a group's price per hour is one number (cost.pricePerHour
// or its older spelling template.pricing.nodePerHour, not two that differ),
// and a price, the group's or a slot's, needs the group's currency.
func (c *checker) costs(groups, slots []any, groupAt map[string]string) {
	currencyOf := map[string]bool{} // group name -> declares a currency
	for i, g := range groups {
		gm, _ := g.(map[string]any)
		ptr := pointer("groups", strconv.Itoa(i))
		name, _ := gm["name"].(string)
		cm, _ := gm["cost"].(map[string]any)
		_, hasCurrency := cm["currency"].(string)
		if groupAt[name] == ptr {
			currencyOf[name] = hasCurrency
		}
		price, priced := number(cm["pricePerHour"])
		if legacy, ok := c.t.get(ptr + "/template/pricing/nodePerHour"); ok && priced {
			if l, ok := number(legacy); ok && l != price {
				c.add(ptr+"/cost/pricePerHour", "is %g but template.pricing.nodePerHour (line %d) is %g: a group has one price per hour; remove template.pricing.nodePerHour (cost.pricePerHour replaces it) or make them equal",
					price, c.t.line(ptr+"/template/pricing/nodePerHour"), l)
			}
		}
		for _, field := range []string{"pricePerHour", "energyPricePerKWh"} {
			if _, ok := number(cm[field]); ok && !hasCurrency {
				c.add(ptr+"/cost/"+field, "a price needs the group's currency: add cost.currency, an ISO 4217 code such as EUR or USD")
			}
		}
	}
	for i, s := range slots {
		sm, _ := s.(map[string]any)
		ptr := pointer("slots", strconv.Itoa(i))
		group, _ := sm["group"].(string)
		cm, _ := sm["cost"].(map[string]any)
		if _, declared := groupAt[group]; !declared || currencyOf[group] {
			continue
		}
		for _, field := range []string{"pricePerHour", "energyPricePerKWh"} {
			if _, ok := number(cm[field]); ok {
				c.add(ptr+"/cost/"+field, "a price needs a currency: add cost.currency to group %q (a slot's prices are in its group's currency)", group)
			}
		}
	}
}

// number reads a number of the tree (numbers are kept as json.Number).
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}
