package projections

import "sync"

// Handover passes what a projection's Apply makes of an event to the model
// behind the projection's own lock, which its readers hold while they
// answer. Apply runs under the views' lock and must not wait for a reader,
// so what it hands over waits in a short queue until whoever takes the
// lock next (the next Apply, a reader, Marshal) applies it.
type Handover[T any] struct {
	mu    sync.Mutex
	items []T
}

// handoverMax bounds the queue: past it Put waits for the reader, holding
// the views' fold back rather than memory without bound.
const handoverMax = 4096

// Put queues items, then applies the queue through apply under lock when
// lock is free now, or when the queue is full after waiting for it.
func (h *Handover[T]) Put(lock *sync.Mutex, apply func([]T), items ...T) {
	h.mu.Lock()
	h.items = append(h.items, items...)
	full := len(h.items) >= handoverMax
	h.mu.Unlock()
	if full {
		lock.Lock()
	} else if !lock.TryLock() {
		return
	}
	defer lock.Unlock()
	h.Drain(apply)
}

// Drain applies the queue through apply; the caller holds the model's
// lock.
func (h *Handover[T]) Drain(apply func([]T)) {
	h.mu.Lock()
	items := h.items
	h.items = nil
	h.mu.Unlock()
	if len(items) > 0 {
		apply(items)
	}
}

// Reset drops the queue.
func (h *Handover[T]) Reset() {
	h.mu.Lock()
	h.items = nil
	h.mu.Unlock()
}
