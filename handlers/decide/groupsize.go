package decide

import (
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// The group rules (maxSize, minSize) are judged on the views of the group;
// the group lock keeps two commands of one process apart, and the
// group-size event keeps two processes apart: it is appended to the group
// aggregate with the group's expectation in the same atomic batch as the
// claims, so of two writers that judged the same group state only the
// first lands.

// sizeIncreased is the group write that goes with the claims writes
// create.
func sizeIncreased(g *projections.Group, now time.Time, ref events.Ref, by string, req events.Request, writes []events.Write) events.Write {
	claims := claimNames(writes)
	return groupWrite(g, now, events.SizeIncreased{Ref: events.Ref{Group: g.Name, Cause: ref.Cause}, Delta: len(claims), RequestedBy: orUnknown(by), Request: req, Claims: claims})
}

// sizeDecreased is the group write that goes with the claims writes take
// out of the group's target.
func sizeDecreased(g *projections.Group, now time.Time, cause, by string, req events.Request, writes []events.Write) events.Write {
	claims := claimNames(writes)
	return groupWrite(g, now, events.SizeDecreased{Ref: events.Ref{Group: g.Name, Cause: cause}, Delta: len(claims), RequestedBy: orUnknown(by), Request: req, Claims: claims})
}

func groupWrite(g *projections.Group, now time.Time, d events.Data) events.Write {
	return events.Write{Aggregate: events.GroupAggregate(g.Name), Expected: g.Seq, Events: []events.Event{{Time: now, Data: d}}}
}

// claimNames are the claims the writes' events are about, in order.
func claimNames(writes []events.Write) []string {
	var out []string
	for _, w := range writes {
		for _, e := range w.Events {
			if c := e.Data.Reference().Claim; c != "" && (len(out) == 0 || out[len(out)-1] != c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// MergeWrites joins the writes to one aggregate into the first of them
// (its expectation is the one the decider read): the built-in scaler's
// ScaleDecided and the SizeIncreased of its claims share the group.
func MergeWrites(writes []events.Write) []events.Write {
	out := make([]events.Write, 0, len(writes))
	at := map[events.Aggregate]int{}
	for _, w := range writes {
		if i, ok := at[w.Aggregate]; ok {
			out[i].Events = append(out[i].Events, w.Events...)
			continue
		}
		at[w.Aggregate] = len(out)
		out = append(out, w)
	}
	return out
}
