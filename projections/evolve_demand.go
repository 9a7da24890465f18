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

// AcceptedRequest is one accepted IncreaseSize a retry is recognised by.
type AcceptedRequest struct {
	Key    string    `json:"key"`
	At     time.Time `json:"at"`
	Claims []string  `json:"claims,omitempty"`
}

// maxAcceptedRequests bounds a group's remembered requests whatever their
// rate.
const maxAcceptedRequests = 64

// sizeIncreased remembers the call's request key. The claims themselves
// are folded from their own events.
func sizeIncreased(s *State, e events.Event) error {
	d := e.Data.(events.SizeIncreased)
	g := s.Groups[d.Group]
	if g == nil || d.Request.Key == "" {
		return nil
	}
	var keep []AcceptedRequest
	for _, r := range g.Requests {
		if e.Time.Sub(r.At) < events.RequestRepeatWindow {
			keep = append(keep, r)
		}
	}
	if len(keep) >= maxAcceptedRequests {
		keep = keep[len(keep)-maxAcceptedRequests+1:]
	}
	g.Requests = append(keep, AcceptedRequest{Key: d.Request.Key, At: e.Time, Claims: d.Claims})
	return nil
}

// AcceptedWithin is the group's accepted IncreaseSize of key within
// events.RequestRepeatWindow before now.
func (s *State) AcceptedWithin(group, key string, now time.Time) (AcceptedRequest, bool) {
	g := s.Groups[group]
	if g == nil || key == "" {
		return AcceptedRequest{}, false
	}
	for i := len(g.Requests) - 1; i >= 0; i-- {
		if r := g.Requests[i]; r.Key == key && now.Sub(r.At) < events.RequestRepeatWindow {
			return r, true
		}
	}
	return AcceptedRequest{}, false
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
