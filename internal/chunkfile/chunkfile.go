// Package chunkfile keeps the sealed chunks of an index's history on
// disk, so the history of a month does not live on the heap: a chunk is
// written once (Append) and read back by its Ref whenever a request or a
// snapshot walks it.
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
	"os"
	"sync"
)

// File is an unlinked, append-only file of chunks.
type File struct {
	f    *os.File
	path string // where it was created: named in errors only

	mu  sync.Mutex
	end int64 // where the next chunk goes: past every chunk written whole
}

// Ref is where a chunk lies in its File, and its checksum.
type Ref struct {
	off int64
	n   uint32
	crc uint32 // CRC-32C of the chunk's bytes
}

// Len is the chunk's length in bytes.
func (r Ref) Len() int { return int(r.n) }

// Open creates an unlinked file in dir; pattern is its temporary name's
// prefix (os.CreateTemp), seen only while it is created.
func Open(dir, pattern string) (*File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, fmt.Errorf("creating a file for an index's history in %s: %w", dir, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("unlinking the index's history file %s: %w", f.Name(), err)
	}
	return New(f), nil
}

// New keeps chunks in f, a file open for reading and writing, from its
// start; Close closes f.
func New(f *os.File) *File { return &File{f: f, path: f.Name()} }

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

// Size is the bytes the chunks take on disk.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.end
}

// Close closes the file, which returns its space to the disk: the chunks'
// Refs are no longer readable.
func (f *File) Close() error { return f.f.Close() }
