package cost

import (
	"fmt"

	"github.com/claimstream/claimstream/internal/chunkfile"
)

// An index's spans, boot marks and owners are its history: some 450,000
// spans and 150,000 marks and owners a month at 10,000 slots, read only
// by a report or a snapshot. With a history file
// (NewRunner's dir) a full chunk of them is written there and read back
// when a report or a snapshot walks it; only the chunk still filling
// stays in memory. A chunk the file refuses (a full disk) is kept in
// memory instead, and counted (History), so the index stays whole and
// says so.

// History is where an index holds its full chunks of history.
type History = chunkfile.Usage

// heldChunks counts the full chunks held in memory, and the history
// file's last refusal.
type heldChunks struct {
	bytes int64
	err   error
}

// store moves full chunk c (of spans, marks or owners) to the history
// file, or, with none or when it refuses it, keeps it in memory.
func (x *Index) store(c *chunkfile.Chunk) {
	if err := x.history.Keep(c); err != nil {
		x.held.err = err
	}
	x.held.bytes += int64(c.InMemory())
}

// chunkBytes is the bytes of chunk ch, the i-th of the index's what
// (spans, boot marks, owners): its own, or read from the history file
// into *scratch.
func (x *Index) chunkBytes(ch *chunkfile.Chunk, what string, i int, scratch *[]byte) ([]byte, error) {
	b, err := x.history.Bytes(ch, scratch)
	if err != nil {
		return nil, fmt.Errorf("chunk %d of its %s: %w", i, what, err)
	}
	return b, nil
}

// History says where the index holds its full chunks of history.
func (x *Index) History() History {
	x.mu.RLock()
	defer x.mu.RUnlock()
	h := History{InMemory: x.held.bytes, Err: x.held.err}
	if x.history != nil {
		h.OnDisk = x.history.Size()
	}
	return h
}

// release gives back the history file's space of every chunk: the
// index is dropped whole (a restore replaced it, or its copy was
// refused).
func (x *Index) release() {
	for c := range x.spans {
		x.history.Drop(&x.spans[c].Chunk)
	}
	for c := range x.marks {
		x.history.Drop(&x.marks[c].Chunk)
	}
	for c := range x.owners {
		x.history.Drop(&x.owners[c])
	}
}
