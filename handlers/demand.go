package handlers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/scale"
	"github.com/claimstream/claimstream/projections"
)

// The demand facts (docs/whatif.md): every call on a group's size is
// recorded as a ScaleRequested, in the append of what it decided, or alone
// when refused, so a what-if replay asks the same of another config.

// scaleRequester is a command whose calls are recorded.
type scaleRequester interface {
	Command
	// scaleRequest is the record of the call; ok false when the command is
	// not a recorded call (the built-in scaler's own, call Decide).
	scaleRequest() (group string, req events.ScaleRequested, ok bool)
}

func (c IncreaseSize) scaleRequest() (string, events.ScaleRequested, bool) {
	return c.Group, events.ScaleRequested{Call: events.CallIncreaseSize, Delta: c.Delta, Requester: orUnknown(c.RequestedBy)}, c.Call == ""
}

func (c DecreaseTargetSize) scaleRequest() (string, events.ScaleRequested, bool) {
	return c.Group, events.ScaleRequested{Call: events.CallDecreaseTargetSize, Delta: c.Delta, Requester: orUnknown(c.RequestedBy)}, true
}

func (c DeleteNodes) scaleRequest() (string, events.ScaleRequested, bool) {
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = nodeName(n)
	}
	return c.Group, events.ScaleRequested{Call: events.CallDeleteNodes, Nodes: names, Requester: orUnknown(c.RequestedBy)}, c.Call == ""
}

// withScaleRequest adds the accepted call's ScaleRequested to the writes
// that carry it out (one append: the demand fact and its decision land
// together or not at all). A call that decided nothing is not recorded.
func withScaleRequest(s *projections.State, cmd scaleRequester, now time.Time, writes []eventlog.Write) []eventlog.Write {
	group, req, ok := cmd.scaleRequest()
	g := s.Groups[group]
	if !ok || len(writes) == 0 || g == nil {
		return writes
	}
	req.Ref = events.Ref{Group: group, Cause: req.Call + " by " + req.Requester}
	req.Accepted = true
	// One write per aggregate: with the call's SizeIncreased or
	// SizeDecreased, the group's write carries both.
	return mergeWrites(append(writes, eventlog.Write{Aggregate: events.GroupAggregate(group), Expected: g.Seq, Events: []events.Event{{Time: now, Data: req}}}))
}

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
func (s *Service) refusalWrite(st *projections.State, cmd Command, now time.Time, refusal error) []eventlog.Write {
	rc, ok := cmd.(scaleRequester)
	var e *Error
	if !ok || !errors.As(refusal, &e) {
		return nil
	}
	group, req, ok := rc.scaleRequest()
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
	return []eventlog.Write{{Aggregate: events.GroupAggregate(group), Expected: g.Seq, Events: []events.Event{{Time: now, Data: req}}}}
}

// recordRefusal appends a refused call's record. It is a fact about the
// caller, not a decision: a failure to write it is logged and the caller
// still gets the refusal.
func (s *Service) recordRefusal(ctx context.Context, writes []eventlog.Write) {
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
