package provider

import (
	"sync"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// groupEntries keeps each group's last NodeGroups entry and which groups
// the events since changed, so that under a steady stream of events (a
// pool churning) NodeGroups builds again only the groups an event named,
// not the 10,000 slots of the pool. It learns of events from the views'
// subscription, which runs after the fold: an entry is reused only when
// the subscription has seen every event up to the views' sequence.
type groupEntries struct {
	mu      sync.Mutex
	state   *projections.State
	builtAt time.Time
	entries map[string]groupEntry
	// Marks since the last build: the groups named, or every group (an
	// event that names none); seen is the last sequence marked.
	dirty map[string]bool
	all   bool
	seen  uint64
}

type groupEntry struct {
	ng    *pb.NodeGroup
	until time.Time // zero: the entry does not change with time alone
}

// mark records a folded event (the views' subscription).
func (c *groupEntries) mark(e events.Event) {
	g := e.Data.Reference().Group
	c.mu.Lock()
	defer c.mu.Unlock()
	if g == "" {
		c.all = true
	} else {
		if c.dirty == nil {
			c.dirty = map[string]bool{}
		}
		c.dirty[g] = true
	}
	c.seen = max(c.seen, e.Seq)
}

// build returns the entries of names for st at now: the unchanged ones
// from the last build, the others from fresh (the views' read lock held by
// the caller, so no event past st.Seq is folded meanwhile). It returns
// the soonest time an entry changes with time alone.
func (c *groupEntries) build(st *projections.State, now time.Time, names []string, fresh func(*projections.Group) (*pb.NodeGroup, time.Time)) ([]*pb.NodeGroup, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reuse := c.entries != nil && c.state == st && c.seen >= st.Seq && !c.all && !now.Before(c.builtAt)
	entries := make(map[string]groupEntry, len(names))
	out := make([]*pb.NodeGroup, 0, len(names))
	var until time.Time
	for _, name := range names {
		e, ok := c.entries[name]
		if !reuse || !ok || c.dirty[name] || (!e.until.IsZero() && !now.Before(e.until)) {
			e.ng, e.until = fresh(st.Groups[name])
		}
		entries[name] = e
		out = append(out, e.ng)
		until = earliest(until, e.until)
	}
	c.state, c.builtAt, c.entries = st, now, entries
	clear(c.dirty)
	c.all = false
	return out, until
}
