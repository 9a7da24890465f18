// Package copycodec is the byte format of the saved copies of serve's
// in-memory indexes (the cost index, the dashboard's timeline index): a
// frame of a 4-byte magic, a version byte, the payload and a CRC-32C of
// everything before it, around a payload of varints, strings and flags.
//
// A Decoder's first fault sticks: every later read returns a zero value,
// so a decode reads straight through and checks Err once. Counts are
// bounded by the bytes left, so a damaged copy cannot ask for a huge
// allocation.
package copycodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Encoder appends a copy's payload to B. An Encoder of a writer
// (NewWriterEncoder) hands B to it whenever B holds a window's worth, so
// a copy of any size is written through that much memory.
type Encoder struct {
	B []byte
	// w takes B in pieces; crc is the checksum of what it took.
	w   io.Writer
	crc uint32
	err error
}

// NewEncoder starts a copy of the given magic (4 bytes) and version, with
// room for about size bytes.
func NewEncoder(magic string, version byte, size int) *Encoder {
	e := &Encoder{B: make([]byte, 0, len(magic)+1+size+4)}
	e.B = append(e.B, magic...)
	e.B = append(e.B, version)
	return e
}

// NewWriterEncoder starts a copy of the given magic (4 bytes) and
// version written to w as it is encoded; End finishes it.
func NewWriterEncoder(w io.Writer, magic string, version byte) *Encoder {
	e := &Encoder{B: make([]byte, 0, streamWindow+512), w: w}
	e.B = append(e.B, magic...)
	e.B = append(e.B, version)
	return e
}

// spill hands B to the writer once it holds a window.
func (e *Encoder) spill() {
	if e.w != nil && len(e.B) >= streamWindow {
		e.flush()
	}
}

func (e *Encoder) flush() {
	e.crc = crc32.Update(e.crc, crcTable, e.B)
	if e.err == nil {
		_, e.err = e.w.Write(e.B)
	}
	e.B = e.B[:0]
}

func (e *Encoder) Uint(v uint64) { e.B = binary.AppendUvarint(e.B, v); e.spill() }
func (e *Encoder) Int(v int64)   { e.B = binary.AppendVarint(e.B, v); e.spill() }
func (e *Encoder) Float(v float64) {
	e.B = binary.LittleEndian.AppendUint64(e.B, math.Float64bits(v))
	e.spill()
}
func (e *Encoder) Str(v string) { e.Uint(uint64(len(v))); e.B = append(e.B, v...); e.spill() }

// StrBytes writes v as Str writes a string of the same bytes.
func (e *Encoder) StrBytes(v []byte) { e.Uint(uint64(len(v))); e.B = append(e.B, v...); e.spill() }
func (e *Encoder) Bool(v bool) {
	if v {
		e.B = append(e.B, 1)
	} else {
		e.B = append(e.B, 0)
	}
	e.spill()
}

// Seal ends the copy with its checksum and returns it (an Encoder of no
// writer).
func (e *Encoder) Seal() []byte {
	return binary.LittleEndian.AppendUint32(e.B, crc32.Checksum(e.B, crcTable))
}

// End writes the rest of the copy and its checksum to the writer: the
// writer's first error, if it returned one.
func (e *Encoder) End() error {
	e.flush()
	e.B = binary.LittleEndian.AppendUint32(e.B, e.crc)
	if e.err == nil {
		_, e.err = e.w.Write(e.B)
	}
	e.B = nil
	return e.err
}

// Decoder reads what an Encoder wrote: from a copy held whole (Open), or
// as it is read from a stream (OpenReader), when only a window of it is
// held.
type Decoder struct {
	// B is the payload not yet decoded: all of it, or, from a stream,
	// the part of it read so far.
	B   []byte
	Err error

	// From a stream: r holds left more payload bytes, then the checksum,
	// which covers sum so far.
	r    io.Reader
	left int
	sum  uint32
	buf  []byte
}

// Open checks b's frame (what names the copy in the error: "a cost index
// copy") and returns a Decoder of its payload.
func Open(b []byte, magic string, version byte, what string) (*Decoder, error) {
	if err := checkHead(b, magic, version, what); err != nil {
		return nil, err
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, errors.New("checksum mismatch")
	}
	return &Decoder{B: body[len(magic)+1:]}, nil
}

func checkHead(b []byte, magic string, version byte, what string) error {
	if len(b) < len(magic)+1+4 || string(b[:len(magic)]) != magic {
		return fmt.Errorf("not %s", what)
	}
	if v := b[len(magic)]; v != version {
		return fmt.Errorf("format version %d, this build reads %d", v, version)
	}
	return nil
}

// streamWindow is how much of a streamed copy a Decoder reads at a time.
const streamWindow = 64 << 10

// OpenReader begins decoding the copy of size bytes that r holds, as it
// is read: only a window of it is held. Its checksum is checked by End,
// once the payload is decoded, so what a decode built before a failing
// End must be dropped.
func OpenReader(r io.Reader, size int, magic string, version byte, what string) (*Decoder, error) {
	head := make([]byte, len(magic)+1)
	if size < len(head)+4 {
		return nil, fmt.Errorf("not %s", what)
	}
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := checkHead(append(head, 0, 0, 0, 0), magic, version, what); err != nil {
		return nil, err
	}
	d := &Decoder{r: r, left: size - len(head) - 4, sum: crc32.Checksum(head, crcTable)}
	d.buf = make([]byte, 0, min(streamWindow, d.left))
	d.B = d.buf
	return d, nil
}

// have makes B hold at least n bytes, reading more of a stream; false
// when the payload holds fewer.
func (d *Decoder) have(n int) bool {
	if len(d.B) >= n {
		return true
	}
	if d.r == nil || n > len(d.B)+d.left {
		return false
	}
	if n > cap(d.buf) {
		d.buf = make([]byte, 0, max(n, 2*cap(d.buf)))
	}
	kept := copy(d.buf[:cap(d.buf)], d.B)
	more := min(cap(d.buf)-kept, d.left)
	got, err := io.ReadFull(d.r, d.buf[kept:kept+more])
	d.sum = crc32.Update(d.sum, crcTable, d.buf[kept:kept+got])
	d.left -= got
	d.B = d.buf[:kept+got]
	if err != nil {
		d.Fail("reading it: %v", err)
		return false
	}
	return len(d.B) >= n
}

// End is the decode's outcome: its first fault, or bytes left unread, or,
// from a stream, a checksum that does not match.
func (d *Decoder) End() error {
	if d.Err == nil && (len(d.B) != 0 || d.left != 0) {
		d.Fail("%d bytes past the end", len(d.B)+d.left)
	}
	if d.Err == nil && d.r != nil {
		var sum [4]byte
		if _, err := io.ReadFull(d.r, sum[:]); err != nil {
			d.Fail("reading its checksum: %v", err)
		} else if binary.LittleEndian.Uint32(sum[:]) != d.sum {
			d.Fail("checksum mismatch")
		}
	}
	return d.Err
}

// Fail records the decode's first fault.
func (d *Decoder) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf(format, args...)
	}
	d.B, d.r, d.left = nil, nil, 0
}

func (d *Decoder) Uint() uint64 {
	if d.Err != nil {
		return 0
	}
	d.have(binary.MaxVarintLen64)
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail("cut short")
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Int() int64 {
	if d.Err != nil {
		return 0
	}
	d.have(binary.MaxVarintLen64)
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail("cut short")
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Float() float64 {
	if d.Err != nil {
		return 0
	}
	if !d.have(8) {
		d.Fail("cut short")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.B))
	d.B = d.B[8:]
	return v
}

// Count is a number of elements to come; each takes at least a byte, so
// a count past the bytes left is damage, not a huge allocation.
func (d *Decoder) Count() int {
	n := d.Uint()
	if left := len(d.B) + d.left; n > uint64(left) {
		d.Fail("a count of %d with %d bytes left", n, left)
		return 0
	}
	return int(n)
}

// Ref is a reference into a table of n (what names the table's entries).
func (d *Decoder) Ref(n uint64, what string) uint64 {
	v := d.Uint()
	if v >= n {
		d.Fail("%s %d of %d", what, v, n)
		return 0
	}
	return v
}

// Bytes is a length-prefixed run of bytes, not copied: from a stream, it
// is valid until the next read.
func (d *Decoder) Bytes() []byte {
	n := d.Count()
	if d.Err != nil || !d.have(n) {
		return nil
	}
	v := d.B[:n]
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Str() string { return string(d.Bytes()) }

func (d *Decoder) Bool() bool {
	if d.Err != nil {
		return false
	}
	if !d.have(1) || d.B[0] > 1 {
		d.Fail("bad flag")
		return false
	}
	v := d.B[0] == 1
	d.B = d.B[1:]
	return v
}
