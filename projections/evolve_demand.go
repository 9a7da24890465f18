package projections

import (
	"time"

	"github.com/claimstream/claimstream/events"
)

// Refusal is a group's last recorded refused scale call: a repeat of it
// within events.RefusalRepeatWindow is counted, not written.
type Refusal struct {
	At     time.Time `json:"at"`
	Call   string    `json:"call"`
	Reason string    `json:"reason"`
}

// DemandObserved is the work the built-in scaler last recorded for the
// group: a new DemandObserved is written only when it differs.
type DemandObserved struct {
	At      time.Time `json:"at"`
	Demand  int       `json:"demand"`
	Pending int       `json:"pending"`
	Running int       `json:"running"`
}

func scaleRequested(s *State, e events.Event) error {
	d := e.Data.(events.ScaleRequested)
	g := s.Groups[d.Group]
	if g == nil {
		return refuse(e, "group %s is not declared", d.Group)
	}
	if !d.Accepted {
		g.LastRefusal = &Refusal{At: e.Time, Call: d.Call, Reason: d.Reason}
	}
	return nil
}

func demandObserved(s *State, e events.Event) error {
	d := e.Data.(events.DemandObserved)
	g := s.Groups[d.Group]
	if g == nil {
		return refuse(e, "group %s is not declared", d.Group)
	}
	g.LastDemand = &DemandObserved{At: e.Time, Demand: d.Demand, Pending: d.Pending, Running: d.Running}
	return nil
}
