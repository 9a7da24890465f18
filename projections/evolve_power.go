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
}

// PoweredOnRecorded reports whether the slot's last power fact says on.
func (sl *Slot) PoweredOnRecorded() bool { return sl.Power != nil && sl.Power.On }

func powerFact(s *State, e events.Event) error {
	var slot string
	var f PowerFact
	switch d := e.Data.(type) {
	case events.MachinePoweredOn:
		slot, f = d.Slot, PowerFact{On: true, At: d.At}
	case events.MachinePoweredOff:
		slot, f = d.Slot, PowerFact{At: d.At}
	}
	sl := s.Slots[slot]
	if sl == nil {
		return refuse(e, "slot %s is not in the views", slot)
	}
	sl.Power = &f
	return nil
}
