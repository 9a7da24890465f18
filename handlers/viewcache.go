package handlers

import (
	"sync"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// viewCache keeps the slot views built from the views: a view is a
// function of the state and the slot alone. A pass runs a dozen reactors
// on each slot, every one of which reads the slot's view; with nothing
// folded for the slot in between they share one copy instead of a dozen
// (copies and their garbage would dominate a what-if replay). The reactors
// only read their view, never change it.
//
// Told of every fold (newViewCache), it forgets only the view of the slot
// an event names, and every view on an event that names none (a group's
// spec, a size request) or when the views are replaced: a reactor's
// append then costs its own slot's view again, not every slot's of the
// pass. Not told (a bare &viewCache{}), it forgets every view whenever the
// views' Seq moves.
//
// It holds at most viewCacheSize views, the oldest built forgotten first:
// a slot's reactors read its view one after the other while a few workers
// build the views of theirs, so the views of the slots being worked on are
// what is worth keeping, not a copy of every slot's a full resync reads.
type viewCache struct {
	mu    sync.Mutex
	state *projections.State
	seq   uint64
	views map[string]slotView
	// built holds the slots in the order their views were built (a ring;
	// a slot built again holds two places, and is forgotten at the first).
	built [viewCacheSize]string
	next  int
}

// viewCacheSize bounds the views kept: many times the workers' slots.
const viewCacheSize = 64

// newViewCache is a viewCache told of every fold of views.
func newViewCache(views *projections.Runner) *viewCache {
	c := &viewCache{}
	views.Publish(c.folded)
	return c
}

// folded runs under the views' write lock after each fold (e nil: the
// views were replaced), so a reader under the read lock never finds a
// view older than the state it reads.
func (c *viewCache) folded(s *projections.State, e *events.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e == nil || c.state != s || c.views == nil || e.Data == nil || e.Data.Reference().Slot == "":
		clear(c.views)
	default:
		delete(c.views, e.Data.Reference().Slot)
	}
	c.state, c.seq = s, s.Seq
}

// get returns the slot's view of s, building it at most once until an
// event changes it (the caller holds the views' read lock).
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
		if verifyViewCache != nil {
			verifyViewCache(slot, v, build())
		}
		return v
	}
	v := build()
	if old := c.built[c.next]; old != "" {
		delete(c.views, old)
	}
	c.built[c.next] = slot
	c.next = (c.next + 1) % viewCacheSize
	c.views[slot] = v
	return v
}

// verifyViewCache, when set (tests), is given every cached view handed
// out with a fresh build of it.
var verifyViewCache func(slot string, cached, fresh slotView)
