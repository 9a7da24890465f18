package projections

import "github.com/claimstream/claimstream/events"

// publishers are the functions the runner calls under the views' write
// lock, right after the views change (see Publish). They are guarded by
// Runner.mu: registered and called only while it is held for writing.
type publishers struct {
	next int
	fns  map[int]func(*State, *events.Event)
}

// Publish calls fn under the views' write lock: once now with the current
// views (e nil), after every event Run folds (e that event), and when Start
// installs newly built views (e nil: everything may have changed).
//
// It is for readers that answer without the views' lock from immutable
// copies they publish themselves (an atomic pointer): a copy made here is
// never behind the views, so whoever WaitFor released, or who read the
// views after an event, finds that event in the copy too, and no copy ever
// shows half of a fold. fn must be quick, must not block, must not keep or
// change st, and must not call the runner (its lock is held). The returned
// func unregisters fn.
func (r *Runner) Publish(fn func(st *State, e *events.Event)) (stop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &r.pubs
	if p.fns == nil {
		p.fns = map[int]func(*State, *events.Event){}
	}
	id := p.next
	p.next++
	p.fns[id] = fn
	fn(r.state, nil)
	return func() {
		r.mu.Lock()
		delete(p.fns, id)
		r.mu.Unlock()
	}
}

// publish runs every publisher; the caller holds the views' write lock.
func (p *publishers) publish(st *State, e *events.Event) {
	for _, fn := range p.fns {
		fn(st, e)
	}
}
