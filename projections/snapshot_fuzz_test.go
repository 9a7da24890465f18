package projections

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

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
	f.Add(plainFrame(f, st, []snapshotPart{{name: "cost", data: []byte{1, 2, 3}}}))
	f.Add([]byte(`{"seq":2,"version":3,"state":{"seq":2}}`))
	f.Add([]byte(`{"version":2,"seq":5,"state":{"seq":4}}`))
	f.Add([]byte(`{"version":3,"seq":0,"state":{}} {}`))
	f.Add([]byte(`{"version":3,"seq":1,"state":{"seq":1},"extra":1}`))
	f.Add([]byte(`{"Version":3,"SEQ":1,"State":{"Seq":1,"slots":{"a":null},"Slots":{"b":{"name":"b"}},"groups":null}}`))
	f.Add([]byte(`{"version":3,"seq":0,"state":{"seq":4},"state":null}`))
	f.Add([]byte(`{"version":3,"seq":0}`))
	f.Add([]byte(`{"version":3,"seq":0,"state":{"claims":{"c":{},"c":null}}} x`))
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
		streamed, streamedErr := decodeViewsFrom(bytes.NewReader(views))
		if (fastErr == nil) != (slowErr == nil) || (streamedErr == nil) != (slowErr == nil) {
			t.Fatalf("one-pass: %v; whole envelope: %v; streamed: %v", fastErr, slowErr, streamedErr)
		}
		if fastErr != nil {
			return
		}
		if x, y := mustMarshal(t, streamed), mustMarshal(t, slow); !bytes.Equal(x, y) {
			t.Fatalf("the streamed reader disagrees:\n%s\n%s", x, y)
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
	b := append(plainFrame(t, NewState(), nil), byte(len("cost")))
	b = append(b, "cost"...)
	b = binary.AppendUvarint(b, 8<<30)
	b = append(b, "only a few bytes"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := startParts(b)
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
	b := plainFrame(t, NewState(), []snapshotPart{{name: "cost", data: part}, {name: "timeline", data: []byte("next")}})
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

// plainFrame is the frame of st and parts as it is before it is stored
// compressed.
func plainFrame(t testing.TB, st *State, parts []snapshotPart) []byte {
	t.Helper()
	views, err := viewsJSON(st)
	if err != nil {
		t.Fatal(err)
	}
	return frameSnapshot(views, parts)
}

// viewsOfSlots are the views of a group of n slots.
func viewsOfSlots(n int) *State {
	st := NewState()
	at := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	_ = Evolve(st, events.Event{Seq: 1, Time: at, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}}})
	for i := range n {
		slot := fmt.Sprintf("slot-%04d", i)
		_ = Evolve(st, events.Event{Seq: uint64(i + 2), Time: at, Data: events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + slot, Address: "10.0.0.1"}}})
	}
	return st
}

// What is stored is the frame compressed, and it reads back as the frame:
// the views as json.Marshal writes their envelope, the parts as given.
func TestAStoredSnapshotIsItsFrameCompressed(t *testing.T) {
	st := viewsOfSlots(200)
	parts := []snapshotPart{{name: "cost", data: bytes.Repeat([]byte{7, 1}, 5000)}, {name: "timeline", data: nil}}
	stored, seq, err := encodeSnapshotParts(st, parts)
	if err != nil || seq != st.Seq {
		t.Fatalf("encode: seq %d, %v", seq, err)
	}
	if !bytes.HasPrefix(stored, []byte(storedMagic)) {
		t.Fatalf("stored form begins %q", stored[:min(len(stored), 24)])
	}
	plain := plainFrame(t, st, parts)
	if len(stored)*3 > len(plain) {
		t.Errorf("stored %d bytes for a frame of %d: not compressed", len(stored), len(plain))
	}
	if cap(stored) != len(stored) {
		t.Errorf("stored form keeps %d spare bytes", cap(stored)-len(stored))
	}
	views, got, err := frameParts(stored)
	if err != nil {
		t.Fatal(err)
	}
	env, err := json.Marshal(snapshotEnvelope{Version: SnapshotVersion, Seq: st.Seq, State: mustMarshal(t, st)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(views, env) {
		t.Fatalf("the views' part is not json.Marshal's envelope:\n%.200s\n%.200s", views, env)
	}
	if !bytes.Equal(got["cost"], parts[0].data) || len(got["timeline"]) != 0 || len(got) != 2 {
		t.Fatalf("the parts read back otherwise: %d parts", len(got))
	}
	back, err := DecodeSnapshot(stored)
	if err != nil {
		t.Fatal(err)
	}
	if x, y := mustMarshal(t, back), mustMarshal(t, st); !bytes.Equal(x, y) {
		t.Fatal("the views decoded from the stored form differ")
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A stored frame is damaged as a frame is: each way is refused as a
// damaged frame, and a length damaged into gigabytes reserves memory for
// what the compressed bytes hold, not for the length.
func TestADamagedStoredSnapshotIsRefused(t *testing.T) {
	plain := plainFrame(t, NewState(), []snapshotPart{{name: "cost", data: []byte("cost")}})
	stored, _, err := encodeSnapshotParts(NewState(), []snapshotPart{{name: "cost", data: []byte("cost")}})
	if err != nil {
		t.Fatal(err)
	}
	body := stored[len(storedMagic):]
	_, k := binary.Uvarint(body)
	relength := func(n uint64) []byte {
		b := append([]byte(storedMagic), binary.AppendUvarint(nil, n)...)
		return append(b, body[k:]...)
	}
	flipped := bytes.Clone(stored)
	flipped[len(flipped)-3] ^= 0x40
	compress := func(frame []byte) []byte {
		var out bytes.Buffer
		w := s2.NewWriter(&out)
		_, _ = w.Write(frame)
		_ = w.Close()
		return append(append([]byte(storedMagic), binary.AppendUvarint(nil, uint64(len(frame)))...), out.Bytes()...)
	}
	for name, b := range map[string][]byte{
		"a flipped bit":           flipped,
		"cut short":               stored[:len(stored)-5],
		"a longer length":         relength(uint64(len(plain) + 1)),
		"a shorter length":        relength(uint64(len(plain) - 1)),
		"a length of 3 GiB":       relength(3 << 30),
		"a length past the limit": relength(maxObjectSize + 1),
		"no length":               []byte(storedMagic),
		"bytes after the stream":  append(bytes.Clone(stored), 0),
		"a JSON snapshot inside":  compress([]byte(`{"version":3,"seq":0,"state":{}}`)),
		"a stored form inside":    compress(stored),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecodeSnapshot(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, errSnapshotFrame) {
			t.Errorf("%s: %v, want a damaged frame", name, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("%s: reading it allocated %d MiB", name, grew>>20)
		}
	}
	if _, err := DecodeSnapshot(relength(uint64(len(plain)))); err != nil {
		t.Fatalf("the stored form with its own length: %v", err)
	}
}

// A stored frame is expanded part by part, each into a buffer of its own
// size when read whole, or read as it is expanded: a start holds at most
// the part it decodes, never the frame.
func TestAStoredSnapshotExpandsPartByPart(t *testing.T) {
	const size = 12 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	letters := func() []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = "abcdefghijklmnop"[rng.IntN(16)]
		}
		return b
	}
	cost, timeline := letters(), letters()
	stored, _, err := encodeSnapshotParts(NewState(), []snapshotPart{{name: "cost", data: cost}, {name: "timeline", data: timeline}})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, s, err := openSnapshotStream(stored)
	if err != nil {
		t.Fatal(err)
	}
	name, part, err := s.next()
	runtime.ReadMemStats(&after)
	if err != nil || name != "cost" || !bytes.Equal(part, cost) || cap(part) != len(part) {
		t.Fatalf("the first part does not read back whole in a buffer of its own: %q, %v", name, err)
	}
	// The first part, and the S2 reader's buffers for one block: the
	// second part is not expanded yet.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > size+4<<20 {
		t.Fatalf("reading the first part of %d MiB allocated %d KiB", size>>20, grew>>10)
	}
	name, part, err = s.next()
	if err != nil || name != "timeline" || !bytes.Equal(part, timeline) {
		t.Fatalf("the second part does not read back whole: %q, %v", name, err)
	}
	if _, _, err := s.next(); !errors.Is(err, io.EOF) || s.finish() != nil {
		t.Fatalf("after the last part: %v, %v", err, s.finish())
	}

	// As a start reads them, each part is read as it is expanded: a
	// projection holds a window of it, not the part.
	_, s, err = openSnapshotStream(stored)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		name string
		data []byte
	}{{"cost", cost}, {"timeline", timeline}} {
		runtime.ReadMemStats(&before)
		name, part, err := s.nextPart()
		if err != nil || name != want.name || part.Len() != size {
			t.Fatalf("part %q: %q of %d bytes, %v", want.name, name, part.Len(), err)
		}
		head := make([]byte, 1<<10)
		if _, err := io.ReadFull(part, head); err != nil || !bytes.Equal(head, want.data[:len(head)]) {
			t.Fatalf("part %q does not read back: %v", name, err)
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
			t.Fatalf("reading the head of part %q of %d MiB allocated %d KiB", name, size>>20, grew>>10)
		}
		// The rest is left unread: the next part reads past it.
	}
	if _, _, err := s.nextPart(); !errors.Is(err, io.EOF) || s.finish() != nil {
		t.Fatalf("after the last part: %v, %v", err, s.finish())
	}
}

// The views of a stored frame are decoded as they are expanded: a start
// allocates for the views it builds, not for their JSON besides.
func TestStoredViewsAreDecodedAsTheyExpand(t *testing.T) {
	st := viewsOfSlots(4000)
	stored, _, err := encodeSnapshotParts(st, []snapshotPart{{name: "cost", data: []byte{1}}})
	if err != nil {
		t.Fatal(err)
	}
	views, _, err := frameParts(stored)
	if err != nil {
		t.Fatal(err)
	}
	allocated := func(decode func() (*State, error)) uint64 {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := decode()
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if x, y := mustMarshal(t, got), mustMarshal(t, st); !bytes.Equal(x, y) {
			t.Fatal("the decoded views differ")
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	// What a start did before: the views' part expanded into a buffer of
	// its own, then decoded.
	whole := allocated(func() (*State, error) {
		views, s, err := openSnapshotFrame(stored)
		if err != nil {
			return nil, err
		}
		if err := s.skipParts(); err != nil {
			return nil, err
		}
		return decodeViews(views)
	})
	streamed := allocated(func() (*State, error) { return DecodeSnapshot(stored) })
	t.Logf("views JSON %d KiB; expanded whole then decoded: %d KiB allocated, decoded as expanded: %d KiB", len(views)>>10, whole>>10, streamed>>10)
	if streamed+uint64(len(views))/4 > whole {
		t.Fatalf("decoding the stored frame allocated %d KiB, expanding its views whole and decoding them %d KiB: the %d KiB of JSON are held whole", streamed>>10, whole>>10, len(views)>>10)
	}
}

// The views' part is written entry by entry, and its bytes are what
// json.Marshal writes for the envelope: every field of State, keys that
// JSON escapes, nil maps and a leader.
func TestViewsAreWrittenAsJSONMarshalWritesThem(t *testing.T) {
	odd := viewsOfSlots(30)
	at := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	_ = Evolve(odd, events.Event{Seq: 40, Time: at, Data: events.SlotDeclared{Ref: events.Ref{Slot: "a<b>&\u2028c", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://x"}}})
	odd.Leader = &Leader{Replica: "r-<1>", Epoch: 3, Since: at, Seq: 9}
	odd.Stats.Skipped = 2
	for name, st := range map[string]*State{"empty": NewState(), "zero": {}, "slots": viewsOfSlots(200), "odd": odd} {
		got, err := viewsJSON(st)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := json.Marshal(snapshotEnvelope{Version: SnapshotVersion, Seq: st.Seq, State: mustMarshal(t, st)})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the views' part is not json.Marshal's envelope:\n%s\n%s", name, got, want)
		}
	}
}

// A part is compressed as its projection writes it: storing a snapshot
// whose part writes 32 MiB allocates well under that.
func TestAPartIsStoredWithoutBeingHeldWhole(t *testing.T) {
	const size, piece = 32 << 20, 64 << 10
	chunk := bytes.Repeat([]byte("claimstream part "), piece/16)[:piece]
	// liveHeap is what the heap holds after a collection: what is
	// reachable, whatever pools dropped or kept.
	liveHeap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var halfway uint64
	write := func(w io.Writer) error {
		for i := range size / piece {
			if i == size/piece/2 {
				halfway = liveHeap()
			}
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	}
	st := viewsOfSlots(10)
	before := liveHeap()
	stored, _, err := encodeSnapshotParts(st, []snapshotPart{{name: "big", write: write}, {name: "small", data: []byte("s")}})
	if err != nil {
		t.Fatal(err)
	}
	// Held whole, half the part would be live halfway through its write;
	// compressed as it is written, what is live is the compressor's
	// blocks and what it has written.
	if grown := int64(halfway) - int64(before); grown > size/4 {
		t.Errorf("halfway through storing a part of %d MiB, the heap held %d MiB more", size>>20, grown>>20)
	}
	_, parts, err := frameParts(stored)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts["big"]) != size || !bytes.Equal(parts["big"][:piece], chunk) || string(parts["small"]) != "s" {
		t.Fatalf("the parts read back otherwise: %d bytes, %q", len(parts["big"]), parts["small"])
	}
}

// A projection that fails to write its part fails the snapshot, naming
// it.
func TestAPartThatFailsToWriteFailsTheSnapshot(t *testing.T) {
	broken := errors.New("disk of the index gone")
	_, _, err := encodeSnapshotParts(viewsOfSlots(3), []snapshotPart{{name: "cost", write: func(w io.Writer) error {
		_, _ = w.Write([]byte("half"))
		return broken
	}}})
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("err = %v, want the part's error naming it", err)
	}
}
