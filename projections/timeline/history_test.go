package timeline

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/projections"
)

// An index with a history file keeps the full chunks of its events'
// instants there, and cuts, counts and saves exactly as one in memory; a
// copy restored with a history file puts its chunks there too.
func TestTheIndexKeepsItsEventInstantsOnDisk(t *testing.T) {
	history, err := chunkfile.Open(t.TempDir(), "timeline")
	if err != nil {
		t.Fatal(err)
	}
	defer history.Close()
	x := foldLifecyclesInto(newFoldingWith(history), 20, 2000)
	want := foldLifecycles(20, 2000)
	if u := x.History(); u.Err != nil || u.InMemory != 0 || u.OnDisk == 0 || len(x.eventsAt.chunks) < 3 {
		t.Fatalf("history %+v in %d chunks: want every full chunk on disk", u, len(x.eventsAt.chunks))
	}
	since, until := x.heldFrom, x.newest.Add(time.Hour)
	mid := since.Add(x.newest.Sub(since) / 3)
	for _, w := range [][2]time.Time{{since, until}, {mid, until}, {since, mid}} {
		if g, w := cutOf(t, x.Index, w[0], w[1]), cutOf(t, want.Index, w[0], w[1]); g != w {
			t.Fatalf("on disk:\n%s\nin memory:\n%s", g, w)
		}
	}
	saved := mustMarshal(t, want)
	if got := mustMarshal(t, x); !bytes.Equal(got, saved) {
		t.Fatalf("the copy of the index on disk is %d bytes unlike the one in memory (%d)", len(got), len(saved))
	}

	y := &Index{history: history}
	st := projections.NewState()
	st.Seq = want.seq
	if err := y.Restore(st, bytes.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	if u := y.History(); u.Err != nil || u.InMemory != 0 || u.OnDisk == 0 {
		t.Fatalf("restored: history %+v, want every full chunk on disk", u)
	}
	if again := mustMarshal(t, y); !bytes.Equal(again, saved) {
		t.Fatal("the restored copy encodes otherwise")
	}
}

// A full disk keeps the chunks in memory and says why; an unreadable
// history fails the cut and the copy with the file's error.
func TestTheIndexSaysWhyItsInstantsAreInMemory(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("this test writes to /dev/full: %v", err)
	}
	x := foldLifecyclesInto(newFoldingWith(chunkfile.New(full, "timeline")), 20, 2000)
	_ = full.Close()
	if u := x.History(); !errors.Is(u.Err, syscall.ENOSPC) || u.InMemory == 0 || u.OnDisk != 0 {
		t.Fatalf("history %+v, want the chunks in memory for ENOSPC", u)
	}
	if g, w := cutOf(t, x.Index, x.heldFrom, x.newest), cutOf(t, foldLifecycles(20, 2000).Index, x.heldFrom, x.newest); g != w {
		t.Fatalf("disk full:\n%s\nin memory:\n%s", g, w)
	}

	history, err := chunkfile.Open(t.TempDir(), "timeline")
	if err != nil {
		t.Fatal(err)
	}
	x = foldLifecyclesInto(newFoldingWith(history), 20, 2000)
	_ = history.Close()
	inChunk := time.UnixMilli(x.eventsAt.chunks[1].lo + 1) // a count cuts through chunk 1
	if _, err := x.cut(inChunk, x.newest, x.newest); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("cut: %v, want the history file's error", err)
	}
	if _, err := x.marshal(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("copy: %v, want the history file's error", err)
	}
}

// History does not wait for a request that holds the index: it says
// what it found last.
func TestHistoryDoesNotWaitForTheIndex(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("this test writes to /dev/full: %v", err)
	}
	defer full.Close()
	x := foldLifecyclesInto(newFoldingWith(chunkfile.New(full, "timeline")), 20, 2000)
	found := x.History()
	if found.InMemory == 0 || found.Err == nil {
		t.Fatalf("history %+v, want chunks in memory for the full disk", found)
	}
	x.mu.Lock() // a request holding the index
	defer x.mu.Unlock()
	if got := x.History(); got != found {
		t.Fatalf("while the index is held: %+v, want what was found last, %+v", got, found)
	}
}
