package handlers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/scale"
	"github.com/claimstream/claimstream/projections"
)

// refusalRepeats counts the refusals not written because the group's last
// recorded refusal says the same within events.RefusalRepeatWindow; the
// next one written carries the count.
type refusalRepeats struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusalRepeats) add(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[key]++
}

func (r *refusalRepeats) take(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n[key]
	delete(r.n, key)
	return n
}

// refusalWrite is the ScaleRequested of a refused call, or nothing when the
// call is not recorded, its group is unknown, the refusal is not the
// group's to record (a command that could not be decided at all) or it
// repeats the group's last recorded refusal within the window.
func (s *Service) refusalWrite(st *projections.State, cmd decide.Command, now time.Time, refusal error) []events.Write {
	rc, ok := cmd.(decide.ScaleRequester)
	var e *decide.Error
	if !ok || !errors.As(refusal, &e) {
		return nil
	}
	group, req, ok := rc.ScaleRequest()
	g := st.Groups[group]
	if !ok || g == nil || g.Retired {
		return nil
	}
	key := group + "\x00" + req.Call + "\x00" + e.Msg
	if last := g.LastRefusal; last != nil && last.Call == req.Call && last.Reason == e.Msg && now.Sub(last.At) < events.RefusalRepeatWindow {
		s.repeats.add(key)
		return nil
	}
	req.Ref = events.Ref{Group: group, Cause: req.Call + " by " + req.Requester + " refused"}
	req.Reason = e.Msg
	req.Repeats = s.repeats.take(key)
	return []events.Write{{Aggregate: events.GroupAggregate(group), Expected: g.Seq, Events: []events.Event{{Time: now, Data: req}}}}
}

// recordRefusal appends a refused call's record. It is a fact about the
// caller, not a decision: a failure to write it is logged and the caller
// still gets the refusal.
func (s *Service) recordRefusal(ctx context.Context, writes []events.Write) {
	if s.views.WritesRefused() != nil {
		return // views over a gap write nothing (execute)
	}
	out, err := s.append(ctx, writes)
	if err != nil {
		s.log.Warn("refused scale call not recorded", "group", writes[0].Aggregate.Name, "err", err)
		return
	}
	if err := s.views.WaitFor(ctx, out.Last); err != nil {
		s.log.Warn("refused scale call recorded, views behind", "group", writes[0].Aggregate.Name, "err", err)
	}
}

// demandChange is the DemandObserved of a built-in group's observation, or
// nil when it says what the group's last one said (written on change,
// never per pass).
func demandChange(g *projections.Group, obs scale.Observation, d scale.Decision, now time.Time) *events.Event {
	var pending, running int
	for _, p := range obs.Pods {
		if !scale.TenantWork(p) {
			continue
		}
		if p.Spec.NodeName == "" {
			pending++
		} else {
			running++
		}
	}
	if last := g.LastDemand; last != nil && last.Demand == d.Demand && last.Pending == pending && last.Running == running {
		return nil
	}
	return &events.Event{Time: now, Data: events.DemandObserved{
		Ref:    events.Ref{Group: g.Name, Cause: "built-in scaler: demand changed"},
		Demand: d.Demand, Pending: pending, Running: running,
	}}
}
