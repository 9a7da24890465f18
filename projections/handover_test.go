package projections

import (
	"slices"
	"sync"
	"testing"
)

// What is handed over while a reader holds the model's lock waits, and is
// applied in order by whoever takes the lock next; a full queue is applied
// once the reader lets go.
func TestHandoverAppliesInOrderOnceTheLockIsFree(t *testing.T) {
	var h Handover[int]
	var lock sync.Mutex
	var got []int
	apply := func(items []int) { got = append(got, items...) }

	h.Put(&lock, apply, 1)
	lock.Lock() // a reader
	h.Put(&lock, apply, 2, 3)
	if !slices.Equal(got, []int{1}) {
		t.Fatalf("applied while the reader held the lock: %v", got)
	}
	h.Drain(apply) // the reader applies what waits before it answers
	lock.Unlock()
	h.Put(&lock, apply, 4)
	if !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("applied %v, want 1 2 3 4", got)
	}

	lock.Lock()
	for i := range handoverMax - 1 {
		h.Put(&lock, apply, 5+i)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Put(&lock, apply, -1) // the queue is full: waits for the reader
	}()
	lock.Unlock()
	<-done
	if len(got) != 4+handoverMax || got[len(got)-1] != -1 {
		t.Fatalf("after the full queue: %d applied, last %d", len(got), got[len(got)-1])
	}
}
