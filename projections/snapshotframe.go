package projections

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

const (
	snapshotMagic = "claimstream-snapshot/1\n"
	viewsPart     = "views"
	// maxPartName bounds a part's name as read.
	maxPartName = 256
)

// snapshotPart is one projection's part of a snapshot.
type snapshotPart struct {
	name string
	data []byte
}

func frameSnapshot(views []byte, parts []snapshotPart) []byte {
	n := len(snapshotMagic) + len(viewsPart) + len(views) + 2*binary.MaxVarintLen64
	for _, p := range parts {
		n += len(p.name) + len(p.data) + 2*binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = append(b, snapshotMagic...)
	add := func(name string, data []byte) {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, uint64(len(data)))
		b = append(b, data...)
	}
	add(viewsPart, views)
	for _, p := range parts {
		add(p.name, p.data)
	}
	return b
}

// errSnapshotFrame: the snapshot's frame is damaged.
var errSnapshotFrame = errors.New("damaged snapshot frame")

// snapshotStream reads a framed snapshot part by part, so a start holds
// one part at a time rather than the whole object (the cost index's part
// grows with the history).
type snapshotStream struct {
	r   *bufio.Reader
	src io.ReadCloser
	// legacy: a JSON snapshot, the views alone.
	legacy bool
	err    error
	done   bool
	seen   map[string]bool
}

// openSnapshotStream reads the views from src and leaves the stream at
// the projections' parts.
func openSnapshotStream(src io.ReadCloser) (*State, *snapshotStream, error) {
	views, s, err := openSnapshotFrame(src)
	if err != nil {
		return nil, nil, err
	}
	st, err := decodeViews(views)
	return st, s, err
}

// openSnapshotFrame reads the views' part from src, undecoded, and leaves
// the stream at the projections' parts. The one reader of the frame: a
// start reads the snapshot object through it, DecodeSnapshot a byte slice.
func openSnapshotFrame(src io.ReadCloser) ([]byte, *snapshotStream, error) {
	s := &snapshotStream{r: bufio.NewReaderSize(src, 64<<10), src: src}
	head, err := s.r.Peek(len(snapshotMagic))
	if len(head) > 0 && head[0] == '{' {
		s.legacy = true
		b, err := io.ReadAll(s.r)
		if err != nil {
			return nil, nil, fmt.Errorf("read snapshot: %w", err)
		}
		return b, s, nil
	}
	if err != nil || string(head) != snapshotMagic {
		return nil, nil, fmt.Errorf("decode snapshot: %w: it begins with neither %q nor JSON", errSnapshotFrame, snapshotMagic[:len(snapshotMagic)-1])
	}
	_, _ = s.r.Discard(len(snapshotMagic))
	name, views, err := s.next()
	if err == nil && name != viewsPart {
		err = fmt.Errorf("decode snapshot: %w: its first part is %q, not the views", errSnapshotFrame, name)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("decode snapshot: %w: no views part", errSnapshotFrame)
		}
		return nil, nil, err
	}
	return views, s, nil
}

// skipParts reads every part after the views to the stream's end and
// keeps none: the frame is checked as a start reads it, without copies of
// parts nobody uses.
func (s *snapshotStream) skipParts() error {
	for {
		_, _, err := s.nextPart(false)
		if errors.Is(err, io.EOF) {
			return s.finish()
		}
		if err != nil {
			s.close()
			return err
		}
	}
}

// next reads the next part; io.EOF after the last.
func (s *snapshotStream) next() (string, []byte, error) { return s.nextPart(true) }

// nextPart reads the next part, its data only when keep; io.EOF after
// the last.
func (s *snapshotStream) nextPart(keep bool) (string, []byte, error) {
	if s.legacy || s.err != nil {
		return "", nil, cmp.Or(s.err, io.EOF)
	}
	name, err := s.field(maxPartName)
	if err != nil {
		s.err = err
		if !errors.Is(err, io.EOF) {
			s.err = fmt.Errorf("decode snapshot: %w: a part's name: %w", errSnapshotFrame, err)
		}
		return "", nil, s.err
	}
	if s.seen[string(name)] {
		s.err = fmt.Errorf("decode snapshot: %w: two parts %q", errSnapshotFrame, name)
		return "", nil, s.err
	}
	var data []byte
	if keep {
		data, err = s.field(maxPartSize)
	} else {
		err = s.skipField(maxPartSize)
	}
	if err != nil {
		s.err = fmt.Errorf("decode snapshot: %w: part %q: %w", errSnapshotFrame, name, err)
		return "", nil, s.err
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[string(name)] = true
	return string(name), data, nil
}

// maxPartSize bounds a part's length as read from the stream.
const maxPartSize = 1 << 34

// fieldStep is the first buffer of a field's read. A longer field doubles
// it until a quarter of its length has arrived, then takes its length at
// once: a damaged length is refused when the bytes run out, having
// allocated a few times what arrived, and a whole part costs about one and
// a half times its size, not the many copies of an append that grows by a
// quarter.
const fieldStep = 1 << 20

// field reads one length-prefixed field; io.EOF only before its first
// byte.
func (s *snapshotStream) field(limit uint64) ([]byte, error) {
	n, err := s.fieldLen(limit)
	if err != nil {
		return nil, err
	}
	b := make([]byte, min(n, fieldStep))
	read := 0
	for {
		m, err := io.ReadFull(s.r, b[read:])
		read += m
		if err != nil {
			return nil, io.ErrUnexpectedEOF
		}
		if uint64(read) == n {
			return b, nil
		}
		next := 2 * uint64(len(b))
		if uint64(read) >= n/4 {
			next = n
		}
		grown := make([]byte, min(n, next))
		copy(grown, b)
		b = grown
	}
}

// skipField reads past one length-prefixed field.
func (s *snapshotStream) skipField(limit uint64) error {
	n, err := s.fieldLen(limit)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(io.Discard, s.r, int64(n)); err != nil {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// fieldLen reads a field's length, refused past limit.
func (s *snapshotStream) fieldLen(limit uint64) (uint64, error) {
	n, err := binary.ReadUvarint(s.r)
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, fmt.Errorf("a length of %d", n)
	}
	return n, nil
}

// close drops the stream unread.
func (s *snapshotStream) close() {
	if !s.done {
		s.done = true
		s.src.Close()
	}
}

// finish reads the stream to its end, where the object store checks the
// object's digest, and closes it: a damaged object is known only then.
func (s *snapshotStream) finish() error {
	if s.done {
		return nil
	}
	s.done = true
	defer s.src.Close()
	if s.err != nil && !errors.Is(s.err, io.EOF) {
		return s.err
	}
	if _, err := io.Copy(io.Discard, s.r); err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	return nil
}
