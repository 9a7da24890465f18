package chunkfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/claimstream/claimstream/internal/logcapture"
)

// testFile is a history file in dir, closed when the test ends.
func testFile(t *testing.T, dir string) *File {
	t.Helper()
	f, err := Open(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// fullDisk is a history file that refuses every write: ENOSPC.
func fullDisk(t *testing.T) *File {
	t.Helper()
	full, err := os.OpenFile("/dev/full", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("this test writes to /dev/full: %v", err)
	}
	f := New(full, "test")
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func TestChunksReadBackAsWritten(t *testing.T) {
	dir := t.TempDir()
	f := testFile(t, dir)
	var refs []Ref
	var want [][]byte
	for i := range 50 {
		b := bytes.Repeat([]byte{byte(i)}, 1+i*37)
		r, err := f.Append(b)
		if err != nil {
			t.Fatal(err)
		}
		refs, want = append(refs, r), append(want, b)
	}
	var buf []byte
	for i := len(refs) - 1; i >= 0; i-- {
		got, err := f.Read(refs[i], buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[i]) || int(refs[i].n) != len(want[i]) {
			t.Fatalf("chunk %d read back as %d bytes, want %d", i, len(got), len(want[i]))
		}
		buf = got
	}
	var size int64
	for _, b := range want {
		size += int64(len(b))
	}
	if f.Size() != size {
		t.Fatalf("Size = %d, want %d", f.Size(), size)
	}
}

// The file has no name: a crash leaves nothing in the data dir.
func TestTheFileHasNoName(t *testing.T) {
	dir := t.TempDir()
	f := testFile(t, dir)
	if _, err := f.Append([]byte("chunk")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("the directory holds %v", entries)
	}
}

func TestOpenInAMissingDirectoryFails(t *testing.T) {
	if _, err := Open(t.TempDir()+"/gone", "test"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not exist", err)
	}
}

// A full disk refuses the chunk and leaves the file as it was.
func TestAFullDiskRefusesAChunk(t *testing.T) {
	f := fullDisk(t)
	if _, err := f.Append([]byte("chunk")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC", err)
	}
	if f.Size() != 0 {
		t.Fatalf("Size = %d after a refused chunk", f.Size())
	}
}

// A chunk is read whole and as written, or not at all.
func TestAReadPastTheEndOrOfAChangedChunkFails(t *testing.T) {
	f := testFile(t, t.TempDir())
	r, err := f.Append([]byte("chunk"))
	if err != nil {
		t.Fatal(err)
	}
	r.off++
	if _, err := f.Read(r, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want ErrUnexpectedEOF", err)
	}
	r.off--
	if _, err := f.f.WriteAt([]byte("C"), r.off); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(r, nil); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a chunk changed on disk read back: err = %v", err)
	}
	_ = f.Close()
	if _, err := f.Read(Ref{n: 1}, nil); err == nil {
		t.Fatal("a closed file read a chunk")
	}
}

// Reads run beside appends (go test -race).
func TestReadsRunBesideAppends(t *testing.T) {
	f := testFile(t, t.TempDir())
	refs := make(chan Ref, 200)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for r := range refs {
				got, err := f.Read(r, buf)
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf("chunk %04d", r.off/10); string(got) != want {
					errs <- fmt.Errorf("read %q, want %q", got, want)
					return
				}
				buf = got
			}
		}()
	}
	for i := range 200 {
		r, err := f.Append(fmt.Appendf(nil, "chunk %04d", i))
		if err != nil {
			t.Fatal(err)
		}
		refs <- r
	}
	close(refs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A freed chunk's space goes back to the disk; the others read as
// written.
func TestAFreedChunkGivesItsSpaceBack(t *testing.T) {
	f := testFile(t, t.TempDir())
	blocks := func() int64 {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	const size = 1 << 20
	first, err := f.Append(bytes.Repeat([]byte("a"), size))
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.Append(bytes.Repeat([]byte("b"), size))
	if err != nil {
		t.Fatal(err)
	}
	before := blocks()
	if err := f.Free(first); err != nil {
		t.Fatal(err)
	}
	if got := blocks(); got > before-size+64<<10 {
		t.Fatalf("the file takes %d bytes after freeing %d of %d", got, size, before)
	}
	if f.Size() != size {
		t.Fatalf("Size = %d, want %d", f.Size(), size)
	}
	if b, err := f.Read(second, nil); err != nil || !bytes.Equal(b, bytes.Repeat([]byte("b"), size)) {
		t.Fatalf("the chunk after the freed one: %v", err)
	}
	if _, err := f.Read(first, nil); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a freed chunk read back: %v", err)
	}
}

// A full chunk goes to the File and reads back; without a File, or when
// the File refuses it, it stays in memory without spare room.
func TestAChunkIsKeptOnDiskOrInMemory(t *testing.T) {
	f := testFile(t, t.TempDir())
	refusing := fullDisk(t)
	for _, tc := range []struct {
		name     string
		f        *File
		onDisk   bool
		refusals error
	}{{"a file", f, true, nil}, {"no file", nil, false, nil}, {"a full disk", refusing, false, syscall.ENOSPC}} {
		c := Chunk{B: append(make([]byte, 0, 100), "twelve bytes"...)}
		if err := tc.f.Keep(&c); !errors.Is(err, tc.refusals) || (err == nil) != (tc.refusals == nil) {
			t.Fatalf("%s: Keep: %v", tc.name, err)
		}
		if onDisk := c.OnDisk() == 12 && c.InMemory() == 0; onDisk != tc.onDisk {
			t.Fatalf("%s: %d bytes on disk, %d in memory", tc.name, c.OnDisk(), c.InMemory())
		}
		if !tc.onDisk && cap(c.B) != len(c.B) {
			t.Fatalf("%s: kept in memory with %d bytes of room", tc.name, cap(c.B)-len(c.B))
		}
		var scratch []byte
		if b, err := tc.f.Bytes(&c, &scratch); err != nil || string(b) != "twelve bytes" {
			t.Fatalf("%s: Bytes: %q, %v", tc.name, b, err)
		}
		tc.f.Drop(&c)
		if c.OnDisk() != 0 {
			t.Fatalf("%s: dropped, %d bytes still on disk", tc.name, c.OnDisk())
		}
	}
	if f.Size() != 0 {
		t.Fatalf("the file holds %d bytes after its chunk was dropped", f.Size())
	}
}

// A full disk is logged when it begins refusing, not once a chunk: a
// File that writes again and then refuses again logs once more.
func TestARefusingFileLogsWhenItBeginsRefusing(t *testing.T) {
	logs, logger := logcapture.New(slog.LevelWarn)
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(logger)
	refusing := fullDisk(t)
	const line = "its history file refuses it"
	for range 3 {
		c := Chunk{B: []byte("chunk")}
		if err := refusing.Keep(&c); err == nil {
			t.Fatal("/dev/full took a chunk")
		}
	}
	if n := logs.Count(line); n != 1 {
		t.Fatalf("three refusals in a row logged %d times:\n%s", n, logs)
	}
	// Writes succeed again (the file behind is swapped), then fail.
	ok := testFile(t, t.TempDir())
	refusing.f, ok.f = ok.f, refusing.f
	if err := refusing.Keep(&Chunk{B: []byte("chunk")}); err != nil {
		t.Fatal(err)
	}
	refusing.f, ok.f = ok.f, refusing.f
	if err := refusing.Keep(&Chunk{B: []byte("chunk")}); err == nil {
		t.Fatal("/dev/full took a chunk")
	}
	if n := logs.Count(line); n != 2 {
		t.Fatalf("a refusal after a chunk written logged %d lines in all, want 2:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "index=test") {
		t.Fatalf("the line does not name the index:\n%s", logs)
	}
}
