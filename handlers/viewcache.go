package handlers

import (
	"sync"

	"github.com/claimstream/claimstream/projections"
)

// viewCache keeps the slot views built from one state of the views: a
// view is a function of the state and the slot alone, and the state
// changes only by folding an event (its Seq moves) or by being replaced.
// A pass runs a dozen reactors on each slot, every one of which reads the
// slot's view; with nothing folded in between they share one copy instead
// of a dozen (a third of a what-if replay's CPU went to those copies).
// The reactors only read their view, never change it.
type viewCache struct {
	mu    sync.Mutex
	state *projections.State
	seq   uint64
	views map[string]slotView
}

// get returns the slot's view of s, building it at most once per state
// and sequence (the caller holds the views' read lock).
func (c *viewCache) get(s *projections.State, slot string, build func() slotView) slotView {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != s || c.seq != s.Seq || c.views == nil {
		c.state, c.seq = s, s.Seq
		if c.views == nil {
			c.views = map[string]slotView{}
		}
		clear(c.views)
	}
	if v, ok := c.views[slot]; ok {
		return v
	}
	v := build()
	c.views[slot] = v
	return v
}
