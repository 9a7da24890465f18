package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
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

// unframeSnapshot splits b into the views' part and the others (keyed by
// name, sub-slices of b).
func unframeSnapshot(b []byte) (views []byte, parts map[string][]byte, err error) {
	if len(b) > 0 && b[0] == '{' {
		return b, nil, nil
	}
	rest, ok := bytes.CutPrefix(b, []byte(snapshotMagic))
	if !ok {
		return nil, nil, fmt.Errorf("decode snapshot: %w: it begins with neither %q nor JSON", errSnapshotFrame, snapshotMagic[:len(snapshotMagic)-1])
	}
	next := func(limit uint64) ([]byte, error) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) || n > limit {
			return nil, errSnapshotFrame
		}
		out := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return out, nil
	}
	for len(rest) > 0 {
		name, err := next(maxPartName)
		if err != nil {
			return nil, nil, fmt.Errorf("decode snapshot: %w: a part's name", err)
		}
		data, err := next(uint64(len(b)))
		if err != nil {
			return nil, nil, fmt.Errorf("decode snapshot: %w: part %q", err, name)
		}
		if string(name) == viewsPart {
			if views != nil {
				return nil, nil, fmt.Errorf("decode snapshot: %w: two views parts", errSnapshotFrame)
			}
			views = data
			continue
		}
		if parts == nil {
			parts = map[string][]byte{}
		}
		if _, dup := parts[string(name)]; dup {
			return nil, nil, fmt.Errorf("decode snapshot: %w: two parts %q", errSnapshotFrame, name)
		}
		parts[string(name)] = data
	}
	if views == nil {
		return nil, nil, fmt.Errorf("decode snapshot: %w: no views part", errSnapshotFrame)
	}
	return views, parts, nil
}
