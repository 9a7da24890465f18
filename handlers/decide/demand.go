package decide

import (
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// The demand facts (docs/whatif.md): every call on a group's size is
// recorded as a ScaleRequested, in the append of what it decided, or alone
// when refused, so a what-if replay asks the same of another config.

// ScaleRequester is a command whose calls are recorded.
type ScaleRequester interface {
	Command
	// ScaleRequest is the record of the call; ok false when the command is
	// not a recorded call (the built-in scaler's own, call Decide).
	ScaleRequest() (group string, req events.ScaleRequested, ok bool)
}

func (c IncreaseSize) ScaleRequest() (string, events.ScaleRequested, bool) {
	return c.Group, events.ScaleRequested{Call: events.CallIncreaseSize, Delta: c.Delta, Requester: orUnknown(c.RequestedBy)}, c.Call == ""
}

func (c DecreaseTargetSize) ScaleRequest() (string, events.ScaleRequested, bool) {
	return c.Group, events.ScaleRequested{Call: events.CallDecreaseTargetSize, Delta: c.Delta, Requester: orUnknown(c.RequestedBy)}, true
}

func (c DeleteNodes) ScaleRequest() (string, events.ScaleRequested, bool) {
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = nodeName(n)
	}
	return c.Group, events.ScaleRequested{Call: events.CallDeleteNodes, Nodes: names, Requester: orUnknown(c.RequestedBy)}, c.Call == ""
}

// withScaleRequest adds the accepted call's ScaleRequested to the writes
// that carry it out (one append: the demand fact and its decision land
// together or not at all). A call that decided nothing is not recorded.
func withScaleRequest(s *projections.State, cmd ScaleRequester, now time.Time, writes []events.Write) []events.Write {
	group, req, ok := cmd.ScaleRequest()
	g := s.Groups[group]
	if !ok || len(writes) == 0 || g == nil {
		return writes
	}
	req.Ref = events.Ref{Group: group, Cause: req.Call + " by " + req.Requester}
	req.Accepted = true
	// One write per aggregate: with the call's SizeIncreased or
	// SizeDecreased, the group's write carries both.
	return MergeWrites(append(writes, events.Write{Aggregate: events.GroupAggregate(group), Expected: g.Seq, Events: []events.Event{{Time: now, Data: req}}}))
}
