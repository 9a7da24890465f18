package whatif

import (
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections/cost"
)

// Outcome is what one run (or the recording) came to over the period.
type Outcome struct {
	Name         string  `json:"name"`
	Claims       int     `json:"claims"`
	MachineHours float64 `json:"machineHours"`
	KWh          float64 `json:"kWh"`
	// Cost is by currency (a pool priced in several is never summed).
	Cost        map[string]float64 `json:"cost"`
	Boots       int                `json:"boots"`
	FailedBoots int                `json:"failedBoots"`
	// TimeToReadyP50/P95: from a claim's creation to its ready, over the
	// claims that became ready in the period.
	TimeToReadyP50 time.Duration `json:"timeToReadyP50"`
	TimeToReadyP95 time.Duration `json:"timeToReadyP95"`
	// WaitMinutes is the demand not yet met, integrated: pending pods of
	// the built-in groups (pod-minutes) plus, for cluster-autoscaler
	// groups, the claims asked for and not yet ready and the machines a
	// refused IncreaseSize asked for, until the group's next call
	// (node-minutes). docs/whatif.md says why they are added.
	WaitMinutes  float64 `json:"waitMinutes"`
	PeakMachines int     `json:"peakMachines"`
	// Events is the count of events the run wrote in the period.
	Events int `json:"events"`
}

// measure reads one log (recorded or simulated) in order and measures it.
type measure struct {
	from, to time.Time
	fold     *cost.Fold
	events   int
	claims   int
	created  map[string]time.Time // live claim -> created
	ready    []time.Duration
	// waiting claims (created, not ready, not ended) -> since
	waiting map[string]time.Time
	waitSec float64
	// pending pods of the built-in groups, latest observation
	pending   int
	pendingAt time.Time
	// refused IncreaseSize per group: machines asked and refused, since
	refused   map[string]refusedAsk
	on        map[string]bool
	up, peak  int
	builtinOf map[string]bool
}

type refusedAsk struct {
	n  int
	at time.Time
}

func newMeasure(from, to time.Time) *measure {
	return &measure{
		from: from, to: to, fold: cost.NewFold(cost.ByGroup, from, to),
		created: map[string]time.Time{}, waiting: map[string]time.Time{}, refused: map[string]refusedAsk{},
		on: map[string]bool{}, builtinOf: map[string]bool{},
	}
}

// clip is t within the period.
func (m *measure) clip(t time.Time) time.Time {
	if t.Before(m.from) {
		return m.from
	}
	if t.After(m.to) {
		return m.to
	}
	return t
}

func (m *measure) span(a, b time.Time) float64 { return m.clip(b).Sub(m.clip(a)).Seconds() }

func (m *measure) apply(e events.Event) {
	if e.Data == nil || !e.Time.Before(m.to) {
		return
	}
	m.fold.Apply(e)
	in := !e.Time.Before(m.from)
	if in {
		m.events++
	}
	switch d := e.Data.(type) {
	case events.GroupDeclared:
		m.builtinOf[d.Group] = d.Spec.Scaler == events.ScalerBuiltin
	case events.GroupChanged:
		m.builtinOf[d.Group] = d.Spec.Scaler == events.ScalerBuiltin
	case events.ClaimCreated:
		if in {
			m.claims++
		}
		m.created[d.Claim] = e.Time
		if !m.builtinOf[d.Group] {
			m.waiting[d.Claim] = e.Time
		}
	case events.ClaimReady:
		if c, ok := m.created[d.Claim]; ok && in {
			m.ready = append(m.ready, e.Time.Sub(c))
		}
		m.stopWaiting(d.Claim, e.Time)
	case events.ClaimFailed:
		m.stopWaiting(d.Claim, e.Time)
	case events.ClaimCancelled:
		m.stopWaiting(d.Claim, e.Time)
	case events.ClaimCompleted:
		m.stopWaiting(d.Claim, e.Time)
	case events.ClaimSuperseded:
		m.stopWaiting(d.Claim, e.Time)
	case events.ScaleRequested:
		if r, ok := m.refused[d.Group]; ok {
			m.waitSec += float64(r.n) * m.span(r.at, e.Time)
			delete(m.refused, d.Group)
		}
		if !d.Accepted && d.Call == events.CallIncreaseSize && d.Delta > 0 {
			m.refused[d.Group] = refusedAsk{n: d.Delta, at: e.Time}
		}
	case events.DemandObserved:
		m.waitSec += float64(m.pending) * m.span(m.pendingAt, e.Time)
		m.pending, m.pendingAt = d.Pending, e.Time
	case events.MachinePoweredOn:
		if !m.on[d.Slot] {
			m.on[d.Slot] = true
			m.up++
			m.peak = max(m.peak, m.up)
		}
	case events.MachinePoweredOff:
		if m.on[d.Slot] {
			m.on[d.Slot] = false
			m.up--
		}
	}
	if !in {
		m.peak = m.up // the machines up when the period starts
	}
}

func (m *measure) stopWaiting(claim string, t time.Time) {
	if since, ok := m.waiting[claim]; ok {
		m.waitSec += m.span(since, t)
		delete(m.waiting, claim)
	}
	delete(m.created, claim)
}

// outcome closes the open intervals at the period's end.
func (m *measure) outcome(name string) Outcome {
	wait := m.waitSec
	for _, since := range m.waiting {
		wait += m.span(since, m.to)
	}
	for _, r := range m.refused {
		wait += float64(r.n) * m.span(r.at, m.to)
	}
	wait += float64(m.pending) * m.span(m.pendingAt, m.to)
	rep := m.fold.Report(m.to)
	o := Outcome{Name: name, Claims: m.claims, Cost: map[string]float64{}, WaitMinutes: round3(wait / 60), PeakMachines: m.peak, Events: m.events}
	for _, t := range rep.Totals {
		o.MachineHours += t.MachineHours
		o.KWh += t.KWh
		o.Boots += t.Boots
		o.FailedBoots += t.FailedBoots
		o.Cost[t.Currency] += t.Cost
	}
	o.MachineHours, o.KWh = round3(o.MachineHours), round3(o.KWh)
	o.TimeToReadyP50, o.TimeToReadyP95 = percentile(m.ready, 50), percentile(m.ready, 95)
	return o
}

// percentile is the nearest-rank percentile (0 of none).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(float64(p) / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// currencies are the currencies of some outcomes, sorted.
func currencies(os ...Outcome) []string {
	set := map[string]bool{}
	for _, o := range os {
		for c := range o.Cost {
			set[c] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
