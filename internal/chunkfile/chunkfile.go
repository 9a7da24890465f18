// Package chunkfile keeps the sealed chunks of an index's history on
// disk, so the history of a month does not live on the heap: a Chunk fills
// in memory, is written once it is full (Keep), read back whenever a
// request or a snapshot walks it (Bytes, checked against its CRC-32C) and
// its space given back when the index drops it (Drop).
//
// The file is created in a directory serve owns (its data dir) and
// unlinked at once: it has no name, so nothing is left behind by a crash
// or a kill -9, and its space is returned when the File is closed or the
// process ends. Reads go through the page cache, which the kernel takes
// back under memory pressure; none of it is the process's own memory.
//
// A File is safe for concurrent use: appends are serialised, reads run
// in parallel with them and with each other.
package chunkfile

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// File is an unlinked, append-only file of chunks.
type File struct {
	f     *os.File
	path  string // where it was created: named in errors only
	index string // whose history it holds: named in the log

	mu    sync.Mutex
	end   int64 // where the next chunk goes: past every chunk written whole
	freed int64 // bytes of chunks freed
	// refusing: the last Keep could not write its chunk; the next refusal
	// is not logged again.
	refusing bool
}

// Ref is where a chunk lies in its File, and its checksum.
type Ref struct {
	off int64
	n   uint32
	crc uint32 // CRC-32C of the chunk's bytes
}

// Open creates an unlinked file in dir for the history of the index
// named index (its temporary name, seen only while it is created, starts
// with it). When it cannot, it logs that the index holds its history in
// memory, and returns why.
func Open(dir, index string) (*File, error) {
	f, err := create(dir, index)
	if err != nil {
		slog.Warn("an index holds its history in memory: its history file cannot be made", "index", index, "dir", dir, "err", err)
		return nil, err
	}
	return New(f, index), nil
}

func create(dir, index string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "."+index+"-history-")
	if err != nil {
		return nil, fmt.Errorf("creating a file for the %s index's history in %s: %w", index, dir, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("unlinking the %s index's history file %s: %w", index, f.Name(), err)
	}
	return f, nil
}

// New keeps the chunks of index's history in f, a file open for reading
// and writing, from its start; Close closes f.
func New(f *os.File, index string) *File { return &File{f: f, path: f.Name(), index: index} }

var (
	// ErrTooLarge: a chunk longer than a Ref holds.
	ErrTooLarge = errors.New("chunk too large")
	// ErrDamaged: a chunk read back is not what was written.
	ErrDamaged = errors.New("chunk damaged on disk")
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Append writes b as the next chunk. A write that fails (a full disk)
// leaves the File as it was: the next Append writes over what it left.
func (f *File) Append(b []byte) (Ref, error) {
	if uint64(len(b)) > 1<<32-1 {
		return Ref{}, fmt.Errorf("appending %d bytes to %s: %w", len(b), f.path, ErrTooLarge)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.f.WriteAt(b, f.end); err != nil {
		return Ref{}, fmt.Errorf("writing %d bytes of an index's history to %s (unlinked): %w", len(b), f.path, err)
	}
	r := Ref{off: f.end, n: uint32(len(b)), crc: crc32.Checksum(b, crcTable)}
	f.end += int64(len(b))
	return r, nil
}

// Read reads chunk r into dst's storage (grown if it is too short) and
// returns it.
func (f *File) Read(r Ref, dst []byte) ([]byte, error) {
	if cap(dst) < int(r.n) {
		dst = make([]byte, r.n)
	}
	dst = dst[:r.n]
	n, err := f.f.ReadAt(dst, r.off)
	if n == len(dst) {
		if crc32.Checksum(dst, crcTable) != r.crc {
			return nil, fmt.Errorf("reading %d bytes of an index's history at %d of %s (unlinked): %w", r.n, r.off, f.path, ErrDamaged)
		}
		return dst, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("reading %d bytes of an index's history at %d of %s (unlinked): %w", r.n, r.off, f.path, err)
}

// Usage says where an index holds its full chunks.
type Usage struct {
	// OnDisk is the bytes of chunks in the history file, InMemory of
	// those held in memory: all of them without a history file, those it
	// refused with one.
	OnDisk, InMemory int64
	// Err is why chunks are held in memory that belong on disk: the
	// history file's last refusal, or why there is no history file.
	Err error
}

// Free gives chunk r's space back to the disk (its Ref is no longer
// readable): the file keeps its length, with a hole where the chunk was.
// A file system without holes keeps the space until the File is closed:
// Free then returns its error, and nothing else changes.
func (f *File) Free(r Ref) error {
	if r.n == 0 {
		return nil
	}
	if err := unix.Fallocate(int(f.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, r.off, int64(r.n)); err != nil {
		return fmt.Errorf("freeing %d bytes of an index's history at %d of %s (unlinked): %w", r.n, r.off, f.path, err)
	}
	f.mu.Lock()
	f.freed += int64(r.n)
	f.mu.Unlock()
	return nil
}

// Size is the bytes the chunks take on disk: those written, less those
// freed.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.end - f.freed
}

// Close closes the file, which returns its space to the disk: the chunks'
// Refs are no longer readable.
func (f *File) Close() error { return f.f.Close() }

// Chunk is a chunk of an index's history: its bytes in memory while it
// fills (B, appended to by the index), then in a File once full (Keep).
type Chunk struct {
	// B is the chunk's bytes while they are in memory; nil once in a
	// File.
	B  []byte
	at Ref
}

// Keep moves full chunk c to f. With no File (f nil), or when f refuses
// it (its error is returned), c stays in memory, without spare room: it is
// held for long. The first refusal after a chunk written (or the first of
// all) is logged: a full disk logs once, not once a chunk.
func (f *File) Keep(c *Chunk) error {
	if f == nil {
		c.Seal()
		return nil
	}
	ref, err := f.Append(c.B)
	f.mu.Lock()
	logIt := err != nil && !f.refusing
	f.refusing = err != nil
	f.mu.Unlock()
	if err == nil {
		c.B, c.at = nil, ref
		return nil
	}
	if logIt {
		slog.Warn("an index holds its history in memory: its history file refuses it", "index", f.index, "err", err)
	}
	c.Seal()
	return err
}

// Seal drops the spare room of c's bytes in memory.
func (c *Chunk) Seal() {
	b := make([]byte, len(c.B)) // exactly: append would round up to a size class
	copy(b, c.B)
	c.B = b
}

// Bytes is c's bytes: its own, or read back from f into *scratch, which
// it grows (a chunk's own bytes are never scratch).
func (f *File) Bytes(c *Chunk, scratch *[]byte) ([]byte, error) {
	if c.B != nil || c.at.n == 0 {
		return c.B, nil
	}
	b, err := f.Read(c.at, *scratch)
	if err != nil {
		return nil, err
	}
	*scratch = b
	return b, nil
}

// Drop gives back c's space in f, if it is there (Free).
func (f *File) Drop(c *Chunk) {
	if c.B == nil && c.at.n > 0 {
		_ = f.Free(c.at)
		c.at = Ref{}
	}
}

// InMemory is the bytes of c held in memory, OnDisk those in a File.
func (c *Chunk) InMemory() int { return len(c.B) }

func (c *Chunk) OnDisk() int {
	if c.B != nil {
		return 0
	}
	return int(c.at.n)
}
