package cost

import "time"

// SlotTotal is what one slot's machine has cost so far, in one currency:
// the counters the metrics export.
type SlotTotal struct {
	Group, Slot, Currency string
	UpSeconds             float64
	Joules                float64
	Cost                  float64
}

// SlotTotals is every slot's total of a fold by slot, open intervals
// counted until end (the fold must be NewFold(BySlot, ...)). Group is the
// slot's group now.
func (f *Fold) SlotTotals(end time.Time) []SlotTotal {
	_, rows := f.closed(end)
	out := make([]SlotTotal, 0, len(rows))
	for k, a := range rows {
		var group string
		if s := f.slots[k.key]; s != nil {
			group = s.group
		}
		out = append(out, SlotTotal{Group: group, Slot: k.key, Currency: k.currency, UpSeconds: a.upSeconds, Joules: a.joules, Cost: a.cost})
	}
	return out
}
