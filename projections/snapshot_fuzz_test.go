package projections

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
)

// FuzzDecodeSnapshot: a snapshot or checkpoint read from the object store
// never panics; what DecodeSnapshot accepts a start reads too; its views
// decode the same by the one-pass reader as by the whole-envelope one (or
// both refuse them); and the parts it holds frame again into a snapshot
// that reads back the same.
func FuzzDecodeSnapshot(f *testing.F) {
	st := NewState()
	at := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	_ = Evolve(st, events.Event{Seq: 1, Time: at, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}}})
	_ = Evolve(st, events.Event{Seq: 2, Time: at, Data: events.SlotDeclared{Ref: events.Ref{Slot: "a", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://a"}}})
	good, _, err := encodeSnapshotParts(st, []snapshotPart{{name: "cost", data: []byte{1, 2, 3}}, {name: "timeline", data: nil}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-2])
	f.Add([]byte(`{"seq":2,"version":3,"state":{"seq":2}}`))
	f.Add([]byte(`{"version":2,"seq":5,"state":{"seq":4}}`))
	f.Add([]byte(`{"version":3,"seq":0,"state":{}} {}`))
	f.Add([]byte(`{"version":3,"seq":1,"state":{"seq":1},"extra":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, decodeErr := DecodeSnapshot(b)
		started, startErr := startParts(b)
		if (decodeErr == nil) != (startErr == nil) {
			t.Fatalf("DecodeSnapshot: %v; as a start reads it: %v", decodeErr, startErr)
		}
		views, parts, err := frameParts(b)
		if err != nil {
			if decodeErr == nil {
				t.Fatalf("a snapshot whose frame is refused (%v) decoded", err)
			}
			return
		}
		if startErr == nil && len(started) != len(parts) {
			t.Fatalf("a start read %d parts, the frame holds %d", len(started), len(parts))
		}
		var again []snapshotPart
		for name, data := range parts {
			again = append(again, snapshotPart{name: name, data: data})
		}
		views2, parts2, err := frameParts(frameSnapshot(views, again))
		if err != nil || !bytes.Equal(views, views2) || len(parts2) != len(parts) {
			t.Fatalf("framed again, the snapshot reads otherwise: %v", err)
		}
		for name, data := range parts {
			if !bytes.Equal(parts2[name], data) {
				t.Fatalf("part %q framed again reads otherwise", name)
			}
		}
		fast, fastErr := decodeViews(views)
		slow, slowErr := decodeSnapshotEnvelope(views)
		if (fastErr == nil) != (slowErr == nil) {
			t.Fatalf("one-pass: %v; whole envelope: %v", fastErr, slowErr)
		}
		if fastErr != nil {
			return
		}
		x, _ := json.Marshal(fast)
		y, _ := json.Marshal(slow)
		if !bytes.Equal(x, y) {
			t.Fatalf("the two readers disagree:\n%s\n%s", x, y)
		}
	})
}

// readParts reads every part after the views, to the stream's end.
func (s *snapshotStream) readParts() (map[string][]byte, error) {
	parts := map[string][]byte{}
	for {
		name, data, err := s.next()
		if errors.Is(err, io.EOF) {
			return parts, s.finish()
		}
		if err != nil {
			return nil, err
		}
		parts[name] = data
	}
}

// frameParts reads b's frame: the views' part, undecoded, and the others.
func frameParts(b []byte) ([]byte, map[string][]byte, error) {
	views, s, err := openSnapshotFrame(b)
	if err != nil {
		return nil, nil, err
	}
	parts, err := s.readParts()
	return views, parts, err
}

// startParts reads b as a start does: the views decoded, then part by
// part.
func startParts(b []byte) (map[string][]byte, error) {
	_, s, err := openSnapshotStream(b)
	if err != nil {
		return nil, err
	}
	return s.readParts()
}

// A part whose length was damaged into gigabytes is refused as a damaged
// frame, with memory for the bytes that are there, not for the length.
func TestSnapshotPartWithADamagedLengthIsRefusedCheaply(t *testing.T) {
	good, _, err := encodeSnapshotParts(NewState(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := append(bytes.Clone(good), byte(len("cost")))
	b = append(b, "cost"...)
	b = binary.AppendUvarint(b, 8<<30)
	b = append(b, "only a few bytes"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = startParts(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errSnapshotFrame) {
		t.Fatalf("a part of 8 GiB holding 16 bytes: %v, want a damaged frame", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("reading it allocated %d MiB", grew>>20)
	}
}

// A start reads the parts of the snapshot it holds whole as sub-slices of
// it: no copy, whatever a part's size, and no room past a part's end that
// an append by its decoder could write into the next part.
func TestASnapshotPartIsReadWithoutACopy(t *testing.T) {
	const size = 24 << 20
	part := bytes.Repeat([]byte("cost index "), size/11+1)[:size]
	b, _, err := encodeSnapshotParts(NewState(), []snapshotPart{{name: "cost", data: part}, {name: "timeline", data: []byte("next")}})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	parts, err := startParts(b)
	runtime.ReadMemStats(&after)
	if err != nil || !bytes.Equal(parts["cost"], part) || string(parts["timeline"]) != "next" {
		t.Fatalf("the parts do not read back whole: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("reading a part of %d MiB allocated %d KiB", size>>20, grew>>10)
	}
	if c := parts["cost"]; cap(c) != len(c) {
		t.Fatalf("the part has room for %d bytes past its end, over the next part", cap(c)-len(c))
	}
}
