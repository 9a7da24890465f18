package projections

import (
	"time"

	"github.com/claimstream/claimstream/events"
)

// PowerFact is a slot's last power fact: whether its machine was recorded
// on or off, and the instant recorded.
type PowerFact struct {
	On bool      `json:"on"`
	At time.Time `json:"at"`
	// Driver: the slot's power driver read it (no Node to observe).
	Driver bool `json:"driver,omitempty"`
}

// PoweredOnRecorded reports whether the slot's last power fact says on.
func (sl *Slot) PoweredOnRecorded() bool { return sl.Power != nil && sl.Power.On }

// SeenOnByDriver: the slot's power driver read its machine on and no Node
// of it is there (yet): a machine up before it joins.
func (sl *Slot) SeenOnByDriver() bool {
	return sl.Power != nil && sl.Power.On && sl.Power.Driver && !sl.Node.Present
}

func powerFact(s *State, e events.Event) error {
	var slot string
	var f PowerFact
	switch d := e.Data.(type) {
	case events.MachinePoweredOn:
		slot, f = d.Slot, PowerFact{On: true, At: d.At, Driver: d.AtSource == events.AtPowerDriver}
	case events.MachinePoweredOff:
		slot, f = d.Slot, PowerFact{At: d.At, Driver: d.AtSource == events.AtPowerDriver}
	}
	sl := s.Slots[slot]
	if sl == nil {
		return refuse(e, "slot %s is not in the views", slot)
	}
	sl.Power = &f
	return nil
}
