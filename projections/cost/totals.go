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

// SlotTotals is every slot's total over the events applied, open intervals
// counted until end: exactly what NewFold(BySlot, zero, zero), fed the same
// events, gives with SlotTotals(end). It costs one pass over the slots (the
// closed intervals are kept summed), not over the spans.
func (x *Index) SlotTotals(end time.Time) []SlotTotal {
	x.mu.RLock()
	defer x.mu.RUnlock()
	rows := make(map[rowKey]*acc, len(x.totals.rows))
	for k, v := range x.totals.rows {
		c := *v
		rows[k] = &c
	}
	// The open intervals, in the order the fold met the slots, as
	// Fold.closed adds them.
	for _, s := range x.fold.order {
		if len(s.segs) > 0 && s.powerAt.Before(end) {
			x.totals.accrue(s, s.on, s.powerAt, end, rows)
		}
	}
	out := make([]SlotTotal, 0, len(rows))
	for k, a := range rows {
		var group string
		if s := x.fold.slots[k.key]; s != nil {
			group = s.group
		}
		out = append(out, SlotTotal{Group: group, Slot: k.key, Currency: k.currency, UpSeconds: a.upSeconds, Joules: a.joules, Cost: a.cost})
	}
	return out
}
