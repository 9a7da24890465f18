package projections

import (
	"sync"

	"github.com/claimstream/claimstream/events"
)

// subscribers are the functions Run calls after each newly folded event,
// next to RunnerOptions.OnEvent: consumers built after the runner (the
// reactors' work queue) subscribe here.
type subscribers struct {
	mu   sync.RWMutex
	next int
	fns  map[int]func(events.Event)
}

// Subscribe calls fn after each event Run folds from now on, outside the
// views' lock, once the views reflect it (fn reads them at that event or
// later). fn must not block. The returned func unsubscribes.
func (r *Runner) Subscribe(fn func(events.Event)) (unsubscribe func()) {
	s := &r.subs
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[int]func(events.Event){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

func (s *subscribers) notify(e events.Event) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, fn := range s.fns {
		fn(e)
	}
}
