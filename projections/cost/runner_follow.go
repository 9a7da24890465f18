package cost

import (
	"sync"

	"github.com/claimstream/claimstream/events"
)

// Following the views' runner. Once built, the cost index applies the
// events the runner folds (Runner.Subscribe hands each over) instead of
// reading the log again per batch: the plane reads its history once. It
// reads the log only to build, and for what the events handed over do not
// continue: a hole, an event it folded already, or more events waiting
// than maxCostFeed.

// maxCostFeed bounds the events waiting for the index: one that falls
// this far behind reads the log instead.
const maxCostFeed = 4096

// costFeed is the events the runner folded since the index last looked.
type costFeed struct {
	mu     sync.Mutex
	events []events.Event
	lost   bool // some were dropped: the log must fill in
}

// add is the runner's hook: it must not block.
func (f *costFeed) add(e events.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost {
		return
	}
	if len(f.events) >= maxCostFeed {
		f.events, f.lost = nil, true
		return
	}
	f.events = append(f.events, e)
}

// take returns the events waiting, and whether some were dropped.
func (f *costFeed) take() ([]events.Event, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs, lost := f.events, f.lost
	f.events, f.lost = nil, false
	return evs, lost
}

// applyFed applies the events handed over that continue what the index
// folded, and reports whether they all did (nothing is left for the log
// to fill in).
func (x *Runner) applyFed() bool {
	evs, lost := x.feed.take()
	x.catchMu.Lock()
	defer x.catchMu.Unlock()
	if !x.built.Load() {
		// The first build reads the log as far as it ends, these included.
		return false
	}
	idx := x.idx.Load()
	for _, e := range evs {
		if e.Seq != x.seq.Load()+1 {
			// A hole, or an event folded already (by the first build or
			// a request's catch-up, or a log replaced under the index):
			// the log says which.
			return false
		}
		idx.Apply(e)
		x.seq.Store(e.Seq)
		x.lastID = e.ID
	}
	return !lost
}

// refusal is why the index refuses reports, if it does.
func (x *Runner) refusal() error {
	x.catchMu.Lock()
	defer x.catchMu.Unlock()
	return x.refused
}
