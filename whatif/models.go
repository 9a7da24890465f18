package whatif

import (
	"slices"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/sim"
)

// MinSamples is how many recorded boots a slot needs before its own
// history models it; a slot with fewer takes its group's (all its slots'
// samples), and a group with fewer the simulator's defaults.
const MinSamples = 3

// Model is one machine as its history shows it.
type Model struct {
	Slot string `json:"slot"`
	// Boots and FailedBoots are the recorded boots (ClaimBooting) and
	// those that failed before the machine came on.
	Boots       int `json:"boots"`
	FailedBoots int `json:"failedBoots"`
	// SlowBoots are the failed boots whose machine came on after all (a
	// boot slower than the group's timeouts): their duration is a sample
	// like any other, and the replay fails them again by the same
	// timeouts, not by chance.
	SlowBoots int `json:"slowBoots"`
	// BootSamples: from a boot's start (ClaimBooting) to the machine on
	// (MachinePoweredOn's instant); ShutdownSamples: from ShutdownFired to
	// MachinePoweredOff's instant.
	BootSamples     []time.Duration `json:"-"`
	ShutdownSamples []time.Duration `json:"-"`
	// TaintSamples: from the machine on (MachinePoweredOn's instant) to
	// its claim's ClaimReady: the readiness gate (taints removed by the
	// machine's agents), as long on a machine that boots in seconds as on
	// one that boots in minutes.
	TaintSamples []time.Duration `json:"-"`
	// FellBack names where a slot with thin history took its model from:
	// "group" or "defaults"; empty when its own history is used.
	FellBack string `json:"fellBack,omitempty"`
}

// FailureRate is the share of boots that failed and whose machine never
// came on (a failed startup Job, a machine that did not start): the slow
// ones fail again of their duration.
func (m Model) FailureRate() float64 {
	if m.Boots == 0 {
		return 0
	}
	return float64(m.FailedBoots-m.SlowBoots) / float64(m.Boots)
}

// Knobs are the model as the simulator plays it.
func (m Model) Knobs() sim.Knobs {
	k := sim.Knobs{BootSamples: m.BootSamples, ShutdownSamples: m.ShutdownSamples, TaintSamples: m.TaintSamples}
	if m.FellBack != "defaults" {
		r := m.FailureRate()
		k.FailureRate = &r
	}
	return k
}

// Models are the machines by slot.
type Models map[string]Model

// FellBack lists the slots modelled from their group or the defaults.
func (ms Models) FellBack() []string {
	var out []string
	for name, m := range ms {
		if m.FellBack != "" {
			out = append(out, name+" ("+m.FellBack+")")
		}
	}
	slices.Sort(out)
	return out
}

// history gathers the machines' recorded behaviour from the log.
type history struct {
	slots map[string]*Model
	// booting: the start of the boot of each slot's claim, until it ends.
	booting map[string]bootStart
	// firing: the last shutdown fired on each slot, until it is off.
	firing map[string]time.Time
	// powered: the machine on of each slot's booting claim, until the
	// claim is ready or fails.
	powered map[string]bootStart
}

type bootStart struct {
	claim  string
	at     time.Time
	failed bool
}

func newHistory() *history {
	return &history{slots: map[string]*Model{}, booting: map[string]bootStart{}, firing: map[string]time.Time{}, powered: map[string]bootStart{}}
}

func (h *history) slot(name string) *Model {
	m := h.slots[name]
	if m == nil {
		m = &Model{Slot: name}
		h.slots[name] = m
	}
	return m
}

func (h *history) apply(e events.Event) {
	switch d := e.Data.(type) {
	case events.ClaimBooting:
		h.slot(d.Slot).Boots++
		h.booting[d.Slot] = bootStart{claim: d.Claim, at: e.Time}
	case events.MachinePoweredOn:
		if b, ok := h.booting[d.Slot]; ok {
			if dur := d.At.Sub(b.at); dur >= 0 {
				m := h.slot(d.Slot)
				m.BootSamples = append(m.BootSamples, dur)
				if b.failed {
					m.SlowBoots++
				} else {
					h.powered[d.Slot] = bootStart{claim: b.claim, at: d.At}
				}
			}
			delete(h.booting, d.Slot)
		}
	case events.ClaimReady:
		if p, ok := h.powered[d.Slot]; ok && p.claim == d.Claim {
			if dur := e.Time.Sub(p.at); dur >= 0 {
				m := h.slot(d.Slot)
				m.TaintSamples = append(m.TaintSamples, dur)
			}
			delete(h.powered, d.Slot)
		}
	case events.ClaimFailed:
		if p, ok := h.powered[d.Slot]; ok && p.claim == d.Claim {
			delete(h.powered, d.Slot)
		}
		if b, ok := h.booting[d.Slot]; ok && b.claim == d.Claim && !b.failed {
			h.slot(d.Slot).FailedBoots++
			// Kept: a machine that comes on before the slot's next boot
			// was slow, not broken.
			b.failed = true
			h.booting[d.Slot] = b
		}
	case events.ShutdownFired:
		h.firing[d.Slot] = e.Time
	case events.MachinePoweredOff:
		if at, ok := h.firing[d.Slot]; ok {
			if dur := d.At.Sub(at); dur >= 0 {
				m := h.slot(d.Slot)
				m.ShutdownSamples = append(m.ShutdownSamples, dur)
			}
			delete(h.firing, d.Slot)
		}
	}
}

// models gives every slot of cfg a model: its own history when it has
// minSamples boots or more, else its group's pooled history, else the
// simulator's defaults.
func (h *history) models(cfg *pool.Config, minSamples int) Models {
	if minSamples <= 0 {
		minSamples = MinSamples
	}
	groups := map[string]*Model{}
	for _, sl := range cfg.Slots {
		g := groups[sl.Group]
		if g == nil {
			g = &Model{}
			groups[sl.Group] = g
		}
		if m := h.slots[sl.Name]; m != nil {
			g.Boots += m.Boots
			g.FailedBoots += m.FailedBoots
			g.SlowBoots += m.SlowBoots
			g.BootSamples = append(g.BootSamples, m.BootSamples...)
			g.ShutdownSamples = append(g.ShutdownSamples, m.ShutdownSamples...)
			g.TaintSamples = append(g.TaintSamples, m.TaintSamples...)
		}
	}
	out := Models{}
	for _, sl := range cfg.Slots {
		own := h.slots[sl.Name]
		switch g := groups[sl.Group]; {
		case own != nil && len(own.BootSamples) >= minSamples:
			out[sl.Name] = *own
		case len(g.BootSamples) >= minSamples:
			m := *g
			m.Slot, m.FellBack = sl.Name, "group"
			out[sl.Name] = m
		default:
			out[sl.Name] = Model{Slot: sl.Name, FellBack: "defaults"}
		}
	}
	return out
}
