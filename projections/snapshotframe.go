package projections

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
)

// A snapshot (and a checkpoint) is a frame of named parts: first "views",
// the views as JSON (snapshotEnvelope), then one part per projection,
// each in its own encoding:
//
//	snapshotMagic
//	for each part: uvarint len(name), name, uvarint len(data), data
//
// A snapshot that begins with '{' is the views alone, as JSON: the form
// written before projections had parts. It restores the views; the
// projections then have no part.
//
// What the object store keeps is the frame compressed (storeFrame):
//
//	storedMagic
//	uvarint len(frame)
//	the frame in S2's stream format: blocks, each with its CRC-32C
//
// The views are JSON with the same keys for every slot and compress
// several-fold; the bucket then keeps, and a read through the server's
// block cache holds, that much less. A frame stored uncompressed still
// reads.

const (
	snapshotMagic = "claimstream-snapshot/1\n"
	storedMagic   = "claimstream-snapshot/s2\n"
	viewsPart     = "views"
	// maxPartName bounds a part's name as read.
	maxPartName = 256
)

// snapshotPart is one projection's part of a snapshot: data, or, when
// write is set, what write writes.
type snapshotPart struct {
	name  string
	data  []byte
	write func(io.Writer) error
}

func (p snapshotPart) writeTo(w io.Writer) error {
	if p.write != nil {
		return p.write(w)
	}
	_, err := w.Write(p.data)
	return err
}

// frameWriter takes a frame field by field.
type frameWriter interface {
	// bytes writes b as it is.
	bytes(b []byte)
	// field writes a field: its length, then what write writes.
	field(write func(io.Writer) error) error
}

// writeFrame writes the frame of the views (what views writes) and parts
// to fw: the one writer of the layout above.
func writeFrame(fw frameWriter, views func(io.Writer) error, parts []snapshotPart) error {
	fw.bytes([]byte(snapshotMagic))
	name := func(n string) {
		fw.bytes(binary.AppendUvarint(nil, uint64(len(n))))
		fw.bytes([]byte(n))
	}
	name(viewsPart)
	if err := fw.field(views); err != nil {
		return err
	}
	for _, p := range parts {
		name(p.name)
		if err := fw.field(p.writeTo); err != nil {
			return fmt.Errorf("encode the %s projection: %w", p.name, err)
		}
	}
	return nil
}

// frameSnapshot is the frame of views and parts, uncompressed.
func frameSnapshot(views []byte, parts []snapshotPart) []byte {
	var f uncompressedFrame
	_ = writeFrame(&f, func(w io.Writer) error { _, err := w.Write(views); return err }, parts)
	return f.b.Bytes()
}

// uncompressedFrame writes a frame uncompressed: each field is held
// whole until its length is known.
type uncompressedFrame struct{ b bytes.Buffer }

func (f *uncompressedFrame) bytes(b []byte) { f.b.Write(b) }

func (f *uncompressedFrame) field(write func(io.Writer) error) error {
	var data bytes.Buffer
	if err := write(&data); err != nil {
		return err
	}
	f.b.Write(binary.AppendUvarint(nil, uint64(data.Len())))
	f.b.Write(data.Bytes())
	return nil
}

// storeFrame is the stored form of the frame of the views (what views
// writes) and parts, compressed as it is written: each field is
// compressed on its own into S2 blocks (the stream format takes streams
// one after the other), and the uncompressed bytes before it, its length
// among them, once it is known. What is held is the compressed frame.
func storeFrame(views func(io.Writer) error, parts []snapshotPart) ([]byte, error) {
	f := &storedFrame{zw: s2.NewWriter(nil, s2.WriterConcurrency(1))}
	if err := writeFrame(f, views, parts); err != nil {
		return nil, err
	}
	if len(f.pending) > 0 {
		if err := f.flushPending(); err != nil {
			return nil, err
		}
	}
	head := binary.AppendUvarint([]byte(storedMagic), f.n)
	size := len(head)
	for _, p := range f.pieces {
		size += len(p)
	}
	// Checkpoints keep what was stored for a while: no spare capacity.
	stored := make([]byte, 0, size)
	stored = append(stored, head...)
	for _, p := range f.pieces {
		stored = append(stored, p...)
	}
	return stored, nil
}

// storedFrame compresses a frame field by field (storeFrame).
type storedFrame struct {
	zw *s2.Writer
	// pending are the frame's bytes before the next field, not yet
	// compressed; pieces the compressed streams so far, in order.
	pending []byte
	pieces  [][]byte
	// n is the frame's length so far.
	n uint64
}

func (f *storedFrame) bytes(b []byte) {
	f.pending = append(f.pending, b...)
	f.n += uint64(len(b))
}

func (f *storedFrame) field(write func(io.Writer) error) error {
	n := &countingWriter{}
	data, err := f.compress(func(w io.Writer) error { n.w = w; return write(n) })
	if err != nil {
		return err
	}
	f.bytes(binary.AppendUvarint(nil, n.n))
	if err := f.flushPending(); err != nil {
		return err
	}
	f.pieces = append(f.pieces, data)
	f.n += n.n
	return nil
}

// flushPending compresses the pending bytes into the next piece.
func (f *storedFrame) flushPending() error {
	head, err := f.compress(func(w io.Writer) error { _, err := w.Write(f.pending); return err })
	if err != nil {
		return err
	}
	f.pieces = append(f.pieces, head)
	f.pending = f.pending[:0]
	return nil
}

// compress is the S2 stream of what write writes to the writer it is
// given.
func (f *storedFrame) compress(write func(io.Writer) error) ([]byte, error) {
	var out bytes.Buffer
	f.zw.Reset(&out)
	if err := write(f.zw); err != nil {
		return nil, err
	}
	if err := f.zw.Close(); err != nil {
		return nil, fmt.Errorf("compress snapshot: %w", err)
	}
	return out.Bytes(), nil
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	k, err := c.w.Write(b)
	c.n += uint64(k)
	return k, err
}

// expansionGuess is how many times its stored size a compressed part is
// first given room for; a part that holds more grows as it is read, so a
// damaged length reserves no more than the bytes that are there support.
const expansionGuess = 16

// openStored begins reading a stored frame (after storedMagic): its
// length, then the frame's magic from the compressed body.
func openStored(b []byte) (*snapshotStream, error) {
	n, k := binary.Uvarint(b)
	switch {
	case k <= 0:
		return nil, errors.New("its length is cut or overflows")
	case n > maxObjectSize:
		return nil, fmt.Errorf("a length of %d", n)
	}
	body := b[k:]
	s := &snapshotStream{r: s2.NewReader(bytes.NewReader(body)), left: n, guess: uint64(len(body)) * expansionGuess}
	magic, err := s.read(uint64(len(snapshotMagic)))
	if err != nil {
		return nil, err
	}
	if string(magic) != snapshotMagic {
		return nil, fmt.Errorf("its compressed body does not begin with %q", snapshotMagic[:len(snapshotMagic)-1])
	}
	return s, nil
}

// read reads the next n bytes of a stored frame into a buffer of their
// own, grown as they arrive.
func (s *snapshotStream) read(n uint64) ([]byte, error) {
	if n > s.left {
		return nil, io.ErrUnexpectedEOF
	}
	buf := make([]byte, 0, min(n, s.guess))
	for uint64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*uint64(cap(buf))+4096))
			copy(grown, buf)
			buf = grown
		}
		got, err := s.r.Read(buf[len(buf):min(uint64(cap(buf)), n)])
		buf = buf[:len(buf)+got]
		s.left -= uint64(got)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("its compressed body ends %d bytes short of its length", s.left)
		}
		if err != nil {
			return nil, fmt.Errorf("its compressed body: %w", err)
		}
	}
	return buf, nil
}

// byteCounter reads single bytes of a stored frame, within its length.
type byteCounter struct{ s *snapshotStream }

func (c byteCounter) ReadByte() (byte, error) {
	if c.s.left == 0 {
		return 0, io.EOF
	}
	b, err := c.s.r.ReadByte()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("its compressed body ends %d bytes short of its length", c.s.left)
		}
		return 0, fmt.Errorf("its compressed body: %w", err)
	}
	c.s.left--
	return b, nil
}

// storedEnd checks that a stored frame read to its length holds nothing
// more.
func (s *snapshotStream) storedEnd() error {
	var more [1]byte
	if got, err := s.r.Read(more[:]); got > 0 || !errors.Is(err, io.EOF) {
		return fmt.Errorf("its compressed body holds more than its length (%v)", cmp.Or(err, errors.New("more bytes")))
	}
	return nil
}

// errSnapshotFrame: the snapshot's frame is damaged.
var errSnapshotFrame = errors.New("damaged snapshot frame")

// snapshotStream reads a framed snapshot part by part. A frame stored
// plain is held whole (readObject assembles an object in one buffer); a
// part is a
// sub-slice of it, never a copy, and a projection's decoder copies what
// it keeps.
type snapshotStream struct {
	// b is the frame after the parts read so far.
	b []byte
	// r reads the rest of a frame stored compressed, left bytes of it:
	// each part is expanded into a buffer of its own as it is read, so a
	// start holds one part, not the frame. guess is what a part is first
	// given room for.
	r     *s2.Reader
	left  uint64
	guess uint64
	// legacy: a JSON snapshot, the views alone.
	legacy bool
	err    error
	seen   map[string]bool
	// open is the part of a stored frame being read (nextPart).
	open *storedPart
}

// openSnapshotStream reads the views from b and leaves the stream at the
// projections' parts. Of a stored frame, the views are decoded as they
// are expanded (decodeViewsFrom): a start never holds their JSON whole.
func openSnapshotStream(b []byte) (*State, *snapshotStream, error) {
	s, err := beginSnapshotFrame(b)
	if err != nil {
		return nil, nil, err
	}
	if s.r != nil {
		st, err := s.decodeStoredViews()
		return st, s, err
	}
	views, err := s.viewsPart()
	if err != nil {
		return nil, nil, err
	}
	st, err := decodeViews(views)
	return st, s, err
}

// openSnapshotFrame reads the views' part of b, undecoded, and leaves the
// stream at the projections' parts.
func openSnapshotFrame(b []byte) ([]byte, *snapshotStream, error) {
	s, err := beginSnapshotFrame(b)
	if err != nil {
		return nil, nil, err
	}
	views, err := s.viewsPart()
	if err != nil {
		return nil, nil, err
	}
	return views, s, nil
}

// beginSnapshotFrame opens b's frame before its views' part. The one
// reader of the frame's start: a start and DecodeSnapshot both read
// through it.
func beginSnapshotFrame(b []byte) (*snapshotStream, error) {
	switch {
	case bytes.HasPrefix(b, []byte(storedMagic)):
		s, err := openStored(b[len(storedMagic):])
		if err != nil {
			return nil, fmt.Errorf("decode snapshot: %w: %w", errSnapshotFrame, err)
		}
		return s, nil
	case len(b) > 0 && b[0] == '{':
		return &snapshotStream{b: b, legacy: true}, nil
	case len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != snapshotMagic:
		return nil, fmt.Errorf("decode snapshot: %w: it begins with neither %q nor JSON", errSnapshotFrame, snapshotMagic[:len(snapshotMagic)-1])
	}
	return &snapshotStream{b: b[len(snapshotMagic):]}, nil
}

// viewsPart reads the views' part, undecoded: of a JSON snapshot, all of
// it.
func (s *snapshotStream) viewsPart() ([]byte, error) {
	if s.legacy {
		return s.b, nil
	}
	name, views, err := s.next()
	if err == nil && name != viewsPart {
		err = fmt.Errorf("decode snapshot: %w: its first part is %q, not the views", errSnapshotFrame, name)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("decode snapshot: %w: no views part", errSnapshotFrame)
		}
		return nil, err
	}
	return views, nil
}

// decodeStoredViews decodes the views' part of a stored frame as it is
// expanded. A damaged frame is told from views that do not decode.
func (s *snapshotStream) decodeStoredViews() (*State, error) {
	name, part, err := s.nextPart()
	if err == nil && name != viewsPart {
		err = fmt.Errorf("decode snapshot: %w: its first part is %q, not the views", errSnapshotFrame, name)
		s.err = err
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("decode snapshot: %w: no views part", errSnapshotFrame)
			s.err = err
		}
		return nil, err
	}
	st, err := decodeViewsFrom(part)
	if ferr := s.partDamage(); ferr != nil {
		return nil, ferr
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Part is a projection's part of a snapshot, Len bytes left to read: of
// a stored frame, read as it is expanded, so a start never holds a part
// whole beside what it decodes from it.
type Part interface {
	io.Reader
	Len() int
}

// nextPart reads the next part's name and returns its bytes to be read;
// io.EOF after the last. The part before it is first read to its end.
func (s *snapshotStream) nextPart() (string, Part, error) {
	if s.r == nil {
		name, data, err := s.next()
		if err != nil {
			return "", nil, err
		}
		return name, bytes.NewReader(data), nil
	}
	name, err := s.partName()
	if err != nil {
		return "", nil, err
	}
	n, err := s.storedLength(maxPartSize)
	if err != nil {
		s.err = fmt.Errorf("decode snapshot: %w: part %q: %w", errSnapshotFrame, name, err)
		return "", nil, s.err
	}
	s.open = &storedPart{s: s, name: name, n: n}
	return name, s.open, nil
}

// drain reads the open part of a stored frame to its end.
func (s *snapshotStream) drain() error {
	if s.open != nil {
		_, _ = io.Copy(io.Discard, s.open)
		if err := s.partDamage(); err != nil {
			return err
		}
		s.open = nil
	}
	return nil
}

// partDamage is the damage the open part's reads met, as the stream's
// error.
func (s *snapshotStream) partDamage() error {
	if s.open == nil || s.open.err == nil {
		return nil
	}
	if s.err == nil {
		s.err = fmt.Errorf("decode snapshot: %w: part %q: %w", errSnapshotFrame, s.open.name, s.open.err)
	}
	return s.err
}

// storedPart reads one part of a stored frame, n bytes, as it is
// expanded; err is the frame's damage, if reading met one.
type storedPart struct {
	s    *snapshotStream
	name string
	n    uint64
	err  error
}

func (p *storedPart) Len() int { return int(min(p.n, maxPartSize)) }

func (p *storedPart) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.n == 0 {
		return 0, io.EOF
	}
	if uint64(len(b)) > p.n {
		b = b[:p.n]
	}
	got, err := p.s.r.Read(b)
	p.n -= uint64(got)
	p.s.left -= uint64(got)
	switch {
	case err == nil, errors.Is(err, io.EOF) && got > 0:
		return got, nil // an end is met again at the next read
	case errors.Is(err, io.EOF):
		p.err = fmt.Errorf("its compressed body ends %d bytes short of its length", p.s.left)
	default:
		p.err = fmt.Errorf("its compressed body: %w", err)
	}
	return got, p.err
}

// skipParts reads every part after the views to the frame's end and keeps
// none: the frame is checked as a start reads it.
func (s *snapshotStream) skipParts() error {
	for {
		_, _, err := s.nextPart()
		if errors.Is(err, io.EOF) {
			return s.finish()
		}
		if err != nil {
			return err
		}
	}
}

// next reads the next part whole; io.EOF after the last.
func (s *snapshotStream) next() (string, []byte, error) {
	name, err := s.partName()
	if err != nil {
		return "", nil, err
	}
	data, err := s.field(maxPartSize)
	if err != nil {
		s.err = fmt.Errorf("decode snapshot: %w: part %q: %w", errSnapshotFrame, name, err)
		return "", nil, s.err
	}
	return name, data, nil
}

// partName reads the next part's name, after the part open before it;
// io.EOF after the last part.
func (s *snapshotStream) partName() (string, error) {
	if err := s.drain(); err != nil {
		return "", err
	}
	if s.legacy || s.err != nil {
		return "", cmp.Or(s.err, io.EOF)
	}
	name, err := s.field(maxPartName)
	if err != nil {
		s.err = err
		if !errors.Is(err, io.EOF) {
			s.err = fmt.Errorf("decode snapshot: %w: a part's name: %w", errSnapshotFrame, err)
		}
		return "", s.err
	}
	if s.seen[string(name)] {
		s.err = fmt.Errorf("decode snapshot: %w: two parts %q", errSnapshotFrame, name)
		return "", s.err
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[string(name)] = true
	return string(name), nil
}

// maxPartSize bounds a part's length as read from the frame.
const maxPartSize = 1 << 34

// field reads one length-prefixed field: of a frame held whole, a
// sub-slice of it with no room past its end; of a stored frame, a buffer
// of its own. io.EOF only before its first byte.
func (s *snapshotStream) field(limit uint64) ([]byte, error) {
	if s.r != nil {
		return s.storedField(limit)
	}
	if len(s.b) == 0 {
		return nil, io.EOF
	}
	n, k := binary.Uvarint(s.b)
	switch {
	case k == 0:
		return nil, io.ErrUnexpectedEOF
	case k < 0:
		return nil, errors.New("a length that overflows 64 bits")
	case n > limit:
		return nil, fmt.Errorf("a length of %d", n)
	case n > uint64(len(s.b)-k):
		return nil, io.ErrUnexpectedEOF
	}
	v := s.b[k : k+int(n) : k+int(n)]
	s.b = s.b[k+int(n):]
	return v, nil
}

func (s *snapshotStream) storedField(limit uint64) ([]byte, error) {
	if s.left == 0 {
		if err := s.storedEnd(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	n, err := s.storedLength(limit)
	if err != nil {
		return nil, err
	}
	return s.read(n)
}

// storedLength reads a field's length from a stored frame: at most limit,
// and no more than the frame has left.
func (s *snapshotStream) storedLength(limit uint64) (uint64, error) {
	n, err := binary.ReadUvarint(byteCounter{s})
	switch {
	case errors.Is(err, io.EOF):
		return 0, io.ErrUnexpectedEOF
	case err != nil:
		return 0, err
	case n > limit:
		return 0, fmt.Errorf("a length of %d", n)
	case n > s.left:
		return 0, io.ErrUnexpectedEOF
	}
	return n, nil
}

// finish ends the read: the error of a damaged frame, if the parts read
// met one. Parts left unread are not checked.
func (s *snapshotStream) finish() error {
	if s.err != nil && !errors.Is(s.err, io.EOF) {
		return s.err
	}
	return nil
}
