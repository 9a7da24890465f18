package projections

import (
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

// snapshotStream reads a framed snapshot part by part. The frame is held
// whole (readObject assembles an object in one buffer); a part is a
// sub-slice of it, never a copy, and a projection's decoder copies what
// it keeps.
type snapshotStream struct {
	// b is the frame after the parts read so far.
	b []byte
	// legacy: a JSON snapshot, the views alone.
	legacy bool
	err    error
	seen   map[string]bool
}

// openSnapshotStream reads the views from b and leaves the stream at the
// projections' parts.
func openSnapshotStream(b []byte) (*State, *snapshotStream, error) {
	views, s, err := openSnapshotFrame(b)
	if err != nil {
		return nil, nil, err
	}
	st, err := decodeViews(views)
	return st, s, err
}

// openSnapshotFrame reads the views' part of b, undecoded, and leaves the
// stream at the projections' parts. The one reader of the frame: a start
// and DecodeSnapshot both read through it.
func openSnapshotFrame(b []byte) ([]byte, *snapshotStream, error) {
	s := &snapshotStream{b: b}
	if len(b) > 0 && b[0] == '{' {
		s.legacy = true
		return b, s, nil
	}
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, nil, fmt.Errorf("decode snapshot: %w: it begins with neither %q nor JSON", errSnapshotFrame, snapshotMagic[:len(snapshotMagic)-1])
	}
	s.b = b[len(snapshotMagic):]
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

// skipParts reads every part after the views to the frame's end and keeps
// none: the frame is checked as a start reads it.
func (s *snapshotStream) skipParts() error {
	for {
		_, _, err := s.next()
		if errors.Is(err, io.EOF) {
			return s.finish()
		}
		if err != nil {
			return err
		}
	}
}

// next reads the next part; io.EOF after the last.
func (s *snapshotStream) next() (string, []byte, error) {
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
	data, err := s.field(maxPartSize)
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

// maxPartSize bounds a part's length as read from the frame.
const maxPartSize = 1 << 34

// field reads one length-prefixed field, a sub-slice of the frame with no
// room past its end; io.EOF only before its first byte.
func (s *snapshotStream) field(limit uint64) ([]byte, error) {
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

// finish ends the read: the error of a damaged frame, if the parts read
// met one. Parts left unread are not checked.
func (s *snapshotStream) finish() error {
	if s.err != nil && !errors.Is(s.err, io.EOF) {
		return s.err
	}
	return nil
}
