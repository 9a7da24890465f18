package events

import "time"

// The power facts of a slot's machine and the prices of its up-time
// (docs/cost.md). The observer writes a power fact when what it observes of
// the Node (Present and Ready) stops agreeing with the slot's last power
// fact, for claimed and unclaimed machines alike; the cost report
// (projections/cost) folds them with the prices below.

const (
	TypeMachinePoweredOn  Type = "MachinePoweredOn"
	TypeMachinePoweredOff Type = "MachinePoweredOff"
)

// Where the instant of a power fact comes from.
const (
	// AtNodeCondition: the lastTransitionTime of the Node's Ready condition.
	AtNodeCondition = "node-condition"
	// AtObserved: the time the observer saw the change (no usable condition:
	// the Node object is gone, or its condition time is outside the window
	// between the slot's previous power fact and now).
	AtObserved = "observed"
	// AtPowerDriver: the time the slot's power driver read the state (its
	// BMC, hypervisor or probe), while the slot had no Node.
	AtPowerDriver = "power-driver"
)

// Why a machine is recorded off (MachinePoweredOff.Reason).
const (
	// PowerOffShutdown: its Node went NotReady after a shutdown Job fired
	// for it (a claim's scale-down or failure, or the input law).
	PowerOffShutdown = "shutdown"
	// PowerOffInputLaw: as PowerOffShutdown, the shutdown being the input
	// law's (no claim wanted the machine).
	PowerOffInputLaw = "input-law-shutdown"
	// PowerOffNotReady: its Node went NotReady with no shutdown fired since
	// the machine came on (a crash, a power cut, a hand on the switch).
	PowerOffNotReady = "node-not-ready"
	// PowerOffNodeDeleted: its Node object disappeared.
	PowerOffNodeDeleted = "node-deleted"
	// PowerOffDriver: its power driver read it off, no shutdown fired since
	// it came on.
	PowerOffDriver = "power-driver-off"
)

// MachinePoweredOn: the slot's machine was observed on (its Node Ready) at
// At. Claim is the slot's live claim at the observation, empty when no
// claim wants the machine.
type MachinePoweredOn struct {
	Ref
	Node     string    `json:"node"`
	At       time.Time `json:"at"`
	AtSource string    `json:"atSource"`
}

// MachinePoweredOff: the slot's machine was observed off (its Node NotReady
// or gone) at At, for Reason. Claim is the claim whose shutdown it was, or
// the slot's live claim, empty when none.
type MachinePoweredOff struct {
	Ref
	Node     string    `json:"node,omitempty"`
	At       time.Time `json:"at"`
	AtSource string    `json:"atSource"`
	Reason   string    `json:"reason"`
}

func (MachinePoweredOn) EventType() Type  { return TypeMachinePoweredOn }
func (MachinePoweredOff) EventType() Type { return TypeMachinePoweredOff }

// Cost is what a machine costs while it is up (and booting): a cloud price
// per hour and a power draw priced per kWh. In a group every field is the
// group's; in a slot a set field overrides the group's (a slot has no
// currency of its own). A nil number is not declared.
type Cost struct {
	// PricePerHour is billed per hour of up-time and boot time (a cloud
	// instance is billed from its start).
	PricePerHour *float64 `json:"pricePerHour,omitempty"`
	// PowerWatts is the draw of a machine that is up; BootWatts of one
	// booting (PowerWatts when not declared).
	PowerWatts *float64 `json:"powerWatts,omitempty"`
	BootWatts  *float64 `json:"bootWatts,omitempty"`
	// EnergyPricePerKWh prices the energy drawn.
	EnergyPricePerKWh *float64 `json:"energyPricePerKWh,omitempty"`
	// Currency is the ISO 4217 code both prices are in (group only).
	Currency string `json:"currency,omitempty"`
}

// NoCurrency is ISO 4217's code for "no currency": the currency of a group
// that prices its machines without naming one.
const NoCurrency = "XXX"

// EffectiveCost is the cost of a machine of a group with the slot's
// overrides applied (either may be nil), its currency NoCurrency when the
// group names none. A group's legacy template.pricing.nodePerHour is its
// price per hour when cost.pricePerHour is not declared.
func EffectiveCost(g GroupSpec, slot *Cost) Cost {
	var c Cost
	if g.Cost != nil {
		c = *g.Cost
	}
	if c.PricePerHour == nil && g.Template != nil && g.Template.Pricing != nil && g.Template.Pricing.NodePerHour > 0 {
		p := g.Template.Pricing.NodePerHour
		c.PricePerHour = &p
	}
	if slot != nil {
		if slot.PricePerHour != nil {
			c.PricePerHour = slot.PricePerHour
		}
		if slot.PowerWatts != nil {
			c.PowerWatts = slot.PowerWatts
		}
		if slot.BootWatts != nil {
			c.BootWatts = slot.BootWatts
		}
		if slot.EnergyPricePerKWh != nil {
			c.EnergyPricePerKWh = slot.EnergyPricePerKWh
		}
	}
	if c.Currency == "" {
		c.Currency = NoCurrency
	}
	return c
}

// Num reads an optional number, 0 when not declared.
func Num(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
