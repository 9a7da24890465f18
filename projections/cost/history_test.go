package cost

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/projections"
)

type fatalf interface {
	Helper()
	Fatalf(string, ...any)
}

// testHistory is one history file for the package's tests (unlinked:
// the test process's end removes it).
var testHistory = sync.OnceValue(func() *chunkfile.File {
	f, err := chunkfile.Open(os.TempDir(), "cost-test")
	if err != nil {
		panic(err)
	}
	return f
})

// historyFile is a history file in the test's temp dir, closed when the
// test ends.
func historyFile(t *testing.T) *chunkfile.File {
	t.Helper()
	f, err := chunkfile.Open(t.TempDir(), "cost")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func mustReport(t fatalf, x *Index, dim Dimension, since, until, end time.Time) Report {
	t.Helper()
	r, err := x.Report(dim, since, until, end)
	if err != nil {
		t.Fatalf("report by %s: %v", dim, err)
	}
	return r
}

func mustMarshal(t fatalf, x *Index, seq uint64) []byte {
	t.Helper()
	b, err := x.MarshalIndex(seq)
	if err != nil {
		t.Fatalf("marshalling the index: %v", err)
	}
	return b
}

// historyLog is 300 slots cycled 10 times: some 15,000 spans, three full
// chunks and an open one.
func historyLog() []events.Event { return cycleLog(300, 10, 0) }

// onDisk fails unless every full chunk of x is on disk (none held in
// memory) and the open one is not.
func onDisk(t *testing.T, x *Index) {
	t.Helper()
	h := x.History()
	if h.Err != nil || h.InMemory != 0 || h.OnDisk == 0 {
		t.Fatalf("history: %+v, want every full chunk on disk", h)
	}
	if len(x.spans) < 3 {
		t.Fatalf("%d chunks of spans; the test wants full ones", len(x.spans))
	}
	for c := range x.spans[:len(x.spans)-1] {
		if x.spans[c].B != nil {
			t.Fatalf("full chunk %d of %d is held in memory", c, len(x.spans))
		}
	}
	if x.spans[len(x.spans)-1].B == nil {
		t.Fatal("the open chunk is not in memory")
	}
	for c := range x.marks[:max(len(x.marks)-1, 0)] {
		if x.marks[c].B != nil {
			t.Fatalf("full chunk %d of %d of boot marks is held in memory", c, len(x.marks))
		}
	}
	for c := range x.owners[:max(len(x.owners)-1, 0)] {
		if x.owners[c].B != nil {
			t.Fatalf("full chunk %d of %d of owners is held in memory", c, len(x.owners))
		}
	}
}

// An index with a history file keeps its full chunks of spans there and
// reports, saves and continues exactly as one in memory.
func TestAnIndexKeepsItsFullChunksOnDisk(t *testing.T) {
	evs := historyLog()
	x := newIndex(historyFile(t))
	x.chunkSpans = 1000 // chunks of marks too
	for _, e := range evs {
		x.Apply(e)
	}
	onDisk(t, x)
	if len(x.marks) < 3 || len(x.owners) < 3 {
		t.Fatalf("%d chunks of boot marks, %d of owners; the test wants full ones", len(x.marks), len(x.owners))
	}
	since, until := evs[0].Time.Add(time.Hour), evs[len(evs)-1].Time.Add(-time.Hour)
	for _, dim := range Dimensions {
		sameReport(t, "on disk", evs, x, dim, since, until, time.Time{})
		sameReport(t, "on disk, open", evs, x, dim, time.Time{}, time.Time{}, evs[len(evs)-1].Time.Add(time.Hour))
	}
	inMemory := NewIndex()
	for _, e := range evs {
		inMemory.Apply(e)
	}
	saved := mustMarshal(t, inMemory, 9)
	if got := mustMarshal(t, x, 9); !bytes.Equal(got, saved) {
		t.Fatalf("the copy of the index on disk is %d bytes unlike the one in memory (%d)", len(got), len(saved))
	}
}

// A copy loaded with a history file puts its full chunks there.
func TestALoadedIndexKeepsItsHistoryOnDisk(t *testing.T) {
	evs := historyLog()
	cut := len(evs) * 2 / 3
	saved := mustMarshal(t, indexOf(evs[:cut]), uint64(cut))
	y, _, err := unmarshalIndexFrom(bytes.NewReader(saved), len(saved), historyFile(t))
	if err != nil {
		t.Fatal(err)
	}
	onDisk(t, y)
	if again := mustMarshal(t, y, uint64(cut)); !bytes.Equal(again, saved) {
		t.Fatalf("the loaded copy encodes to %d bytes unlike the %d saved", len(again), len(saved))
	}
	for _, e := range evs[cut:] {
		y.Apply(e)
	}
	for _, dim := range Dimensions {
		sameReport(t, "loaded on disk and continued", evs, y, dim, time.Time{}, time.Time{}, evs[len(evs)-1].Time)
	}
}

// A full disk refuses the chunks: the index holds them in memory, says
// why, and reports as before.
func TestAFullDiskKeepsTheHistoryInMemory(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("this test writes to /dev/full: %v", err)
	}
	x := newIndex(chunkfile.New(full, "cost"))
	defer full.Close()
	evs := historyLog()
	for _, e := range evs {
		x.Apply(e)
	}
	h := x.History()
	if !errors.Is(h.Err, syscall.ENOSPC) || h.InMemory == 0 || h.OnDisk != 0 {
		t.Fatalf("history: %+v, want the chunks in memory for ENOSPC", h)
	}
	for _, dim := range Dimensions {
		sameReport(t, "disk full", evs, x, dim, time.Time{}, time.Time{}, evs[len(evs)-1].Time)
	}
}

// A history that cannot be read back fails the report and the copy, with
// the file's error: never a report short of the chunk.
func TestAnUnreadableHistoryFailsTheReport(t *testing.T) {
	history := historyFile(t)
	x := newIndex(history)
	for _, e := range historyLog() {
		x.Apply(e)
	}
	_ = history.Close()
	if _, err := x.Report(ByGroup, time.Time{}, time.Time{}, time.Now()); !errors.Is(err, os.ErrClosed) || !strings.Contains(err.Error(), "history") {
		t.Fatalf("report: %v, want the history file's error", err)
	}
	if _, err := x.MarshalIndex(1); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("copy: %v, want the history file's error", err)
	}
	if err := x.WriteIndex(&bytes.Buffer{}, 1); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("written copy: %v, want the history file's error", err)
	}
}

// A runner keeps one history file: a restore gives back the space of the
// index it replaces, and a copy it refuses (cut short, or of another
// sequence) leaves none of its chunks behind.
func TestARestoreReleasesTheReplacedIndexsHistory(t *testing.T) {
	evs := cycleLog(300, 30, 0) // full chunks of boot marks too
	cut := len(evs) * 2 / 3
	saved := mustMarshal(t, indexOf(evs[:cut]), uint64(cut))
	history := historyFile(t)
	x := &Runner{history: history}
	x.setIndex(newIndex(history))
	for _, e := range evs {
		x.Apply(nil, e)
	}
	x.mu.Lock()
	x.pending.Drain(x.applyLocked)
	x.mu.Unlock()
	onDisk(t, x.idx)
	heldBy := func(idx *Index) int64 {
		var n int64
		for c := range idx.spans {
			n += int64(idx.spans[c].OnDisk())
		}
		for c := range idx.marks {
			n += int64(idx.marks[c].OnDisk())
		}
		for c := range idx.owners {
			n += int64(idx.owners[c].OnDisk())
		}
		return n
	}
	if err := x.Restore(&projections.State{Seq: uint64(cut)}, bytes.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	onDisk(t, x.idx)
	if x.idx.marks[0].OnDisk() == 0 {
		t.Fatal("the restored index holds no boot marks on disk; the test wants some")
	}
	if got, want := history.Size(), heldBy(x.idx); got != want {
		t.Fatalf("after a restore the file holds %d bytes, the index %d", got, want)
	}
	for _, refused := range []struct {
		name string
		seq  int
		copy []byte
	}{{"a copy cut short", cut, saved[:len(saved)*3/4]}, {"a copy of another sequence", cut + 1, saved}} {
		if err := x.Restore(&projections.State{Seq: uint64(refused.seq)}, bytes.NewReader(refused.copy)); err == nil {
			t.Fatalf("%s: restored", refused.name)
		}
		if got := history.Size(); got != 0 {
			t.Fatalf("%s: refused, the file still holds %d bytes", refused.name, got)
		}
	}
}
