package cost

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/claimstream/claimstream/events"
)

// An index built from events 1..k, saved, loaded and fed k+1..n reports
// what the fold of 1..n reports, exactly, for random windows and every
// dimension, and its slot totals are the fold's to the last bit; the
// loaded copy encodes to the same bytes as the one saved.
func TestPropertyIndexRoundTripContinues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t)
		h.evs = withPoolChanges(t, h.evs)
		cut := rapid.IntRange(0, len(h.evs)).Draw(t, "cut")
		x := indexOf(h.evs[:cut])
		saved := mustMarshal(t, x, uint64(cut))
		y, seq, err := UnmarshalIndex(saved)
		if err != nil {
			t.Fatalf("loading the copy at %d: %v", cut, err)
		}
		if seq != uint64(cut) {
			t.Fatalf("the copy covers seq %d, saved at %d", seq, cut)
		}
		if again := mustMarshal(t, y, seq); !bytes.Equal(again, saved) {
			t.Fatalf("the loaded copy encodes to %d bytes unlike the %d saved", len(again), len(saved))
		}
		var written bytes.Buffer
		if err := x.WriteIndex(&written, uint64(cut)); err != nil || !bytes.Equal(written.Bytes(), saved) {
			t.Fatalf("the copy written as it is encoded (%d bytes, %v) is not the one marshalled (%d)", written.Len(), err, len(saved))
		}
		for _, e := range h.evs[cut:] {
			y.Apply(e)
		}
		start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		a := start.Add(time.Duration(rapid.IntRange(-3600, 30*3600).Draw(t, "since")) * time.Second)
		b := a.Add(time.Duration(rapid.IntRange(1, 40*3600).Draw(t, "length")) * time.Second)
		end := propUntil.Add(time.Hour)
		for _, w := range [][2]time.Time{{propSince, propUntil}, {a, b}, {start.AddDate(-1, 0, 0), {}}} {
			for _, dim := range Dimensions {
				sameReport(t, "loaded and continued", h.evs, y, dim, w[0], w[1], end)
			}
		}
		sameTotals(t, "loaded and continued", h.evs, y, end)
		sameTotals(t, "loaded and continued, open", h.evs, y, start.AddDate(0, 0, 3))
	})
}

// The transcripts' logs, saved halfway and at the end, continue exactly.
func TestIndexRoundTripOnTranscripts(t *testing.T) {
	files := transcriptFiles(t)
	for _, file := range files {
		evs, _ := readTranscript(t, file)
		for _, cut := range []int{len(evs) / 2, len(evs)} {
			x := indexOf(evs[:cut])
			y, _, err := UnmarshalIndex(mustMarshal(t, x, uint64(cut)))
			if err != nil {
				t.Fatalf("%s at %d: %v", file, cut, err)
			}
			for _, e := range evs[cut:] {
				y.Apply(e)
			}
			first, last := evs[0].Time, evs[len(evs)-1].Time
			for _, dim := range Dimensions {
				sameReport(t, filepath.Base(file), evs, y, dim, first.Add(-time.Hour), last.AddDate(0, 0, 1), time.Time{})
			}
			sameTotals(t, filepath.Base(file), evs, y, last.AddDate(0, 0, 1))
		}
	}
}

// A loaded index holds each name once: the slots' and their segments'
// names, groups and requesters are the index's names, a segment's claim
// is its live claim's name, the reasons are the package's.
func TestALoadedIndexSharesTheNamesItHolds(t *testing.T) {
	same := func(what, a, b string) {
		t.Helper()
		if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
			t.Fatalf("%s %q is a copy of %q, not it", what, a, b)
		}
	}
	for _, file := range transcriptFiles(t) {
		evs, _ := readTranscript(t, file)
		y, _, err := UnmarshalIndex(mustMarshal(t, indexOf(evs), uint64(len(evs))))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := func(s string) string {
			id, ok := y.nameIDs[s]
			if !ok {
				t.Fatalf("%s: %q is not one of the index's names", file, s)
			}
			return y.names[id]
		}
		segs := 0
		for _, s := range y.fold.order {
			same("slot", s.name, name(s.name))
			same("group", s.group, name(s.group))
			for _, seg := range s.segs {
				segs++
				same("segment's group", seg.group, name(seg.group))
				if seg.requester != Unclaimed {
					same("segment's requester", seg.requester, name(seg.requester))
				}
				if s.live != nil && seg.claim == s.live.name {
					same("segment's claim", seg.claim, s.live.name)
				}
			}
		}
		if segs == 0 {
			t.Fatalf("%s: no segment to check", file)
		}
	}
}

// A copy with any byte changed, cut short, or of another version is
// refused with ErrIndexDamaged, never loaded.
func TestUnmarshalIndexRefusesDamage(t *testing.T) {
	evs, _ := readTranscript(t, "testdata/worked-example.txt")
	x := indexOf(evs)
	good := mustMarshal(t, x, uint64(len(evs)))
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x10
		if _, _, err := UnmarshalIndex(bad); !errors.Is(err, ErrIndexDamaged) {
			t.Fatalf("byte %d of %d altered: %v, want ErrIndexDamaged", i, len(good), err)
		}
	}
	for _, n := range []int{0, 3, 5, len(good) / 2, len(good) - 1} {
		if _, _, err := UnmarshalIndex(good[:n]); !errors.Is(err, ErrIndexDamaged) {
			t.Fatalf("cut to %d of %d bytes: %v, want ErrIndexDamaged", n, len(good), err)
		}
	}
}

// UnmarshalIndex never panics, from the whole copy or from a stream, and
// what it accepts encodes back to the same bytes.
func FuzzUnmarshalIndex(f *testing.F) {
	f.Add(mustMarshal(f, NewIndex(), 0))
	f.Add([]byte("CSIX\x01"))
	f.Add(mustMarshal(f, seedIndex(), 7))
	f.Fuzz(func(t *testing.T, b []byte) {
		x, seq, err := UnmarshalIndex(b)
		// Read from a stream, the copy is decoded before its checksum is
		// checked: it must refuse or accept as the whole copy is.
		xs, seqs, errs := UnmarshalIndexFrom(bytes.NewReader(b), len(b))
		if (err == nil) != (errs == nil) || errs != nil && !errors.Is(errs, ErrIndexDamaged) {
			t.Fatalf("whole: %v; streamed: %v", err, errs)
		}
		if err == nil && (seqs != seq || !bytes.Equal(mustMarshal(t, xs, seqs), mustMarshal(t, x, seq))) {
			t.Fatal("the streamed copy decodes otherwise")
		}
		if err != nil {
			if !errors.Is(err, ErrIndexDamaged) {
				t.Fatalf("refused without ErrIndexDamaged: %v", err)
			}
			return
		}
		if again := mustMarshal(t, x, seq); !bytes.Equal(again, b) {
			t.Fatalf("accepted %d bytes that encode back to %d", len(b), len(again))
		}
		mustReport(t, x, ByClaim, time.Time{}, time.Time{}, time.Unix(2e9, 0))
		x.SlotTotals(time.Unix(2e9, 0))
	})
}

// seedIndex is an index of a small log with a claim, a boot, a pause and
// machines up and down: every part of a copy.
func seedIndex() *Index {
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	price := 1.5
	x := NewIndex()
	for i, d := range []events.Data{
		events.GroupDeclared{Ref: events.Ref{Group: "g"}, Spec: events.GroupSpec{Cost: &events.Cost{PricePerHour: &price, PowerWatts: &price, Currency: "EUR"}}},
		events.SlotDeclared{Ref: events.Ref{Slot: "a", Group: "g"}},
		events.ClaimCreated{Ref: events.Ref{Slot: "a", Group: "g", Claim: "c1"}, RequestedBy: "ca"},
		events.ClaimBooting{Ref: events.Ref{Slot: "a", Group: "g", Claim: "c1"}},
		events.MachinePoweredOn{Ref: events.Ref{Slot: "a", Group: "g", Claim: "c1"}, At: at.Add(time.Minute), AtSource: events.AtObserved},
		events.ClaimCompleted{Ref: events.Ref{Slot: "a", Group: "g", Claim: "c1"}},
		events.UnclaimedShutdownPaused{Ref: events.Ref{Slot: "a", Group: "g"}, PausedUntil: at.Add(time.Hour)},
	} {
		x.Apply(events.Event{Seq: uint64(i + 1), Time: at.Add(time.Duration(i) * time.Minute), Data: d})
	}
	return x
}

// A copy whose slot holds a segment of another slot is refused as
// damaged, although its checksum is right: a segment is always its own
// slot's.
func TestUnmarshalIndexRefusesASegmentOfAnotherSlot(t *testing.T) {
	x := seedIndex()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	x.Apply(events.Event{Seq: 8, Time: at.Add(8 * time.Minute), Data: events.SlotDeclared{Ref: events.Ref{Slot: "b", Group: "g"}}})
	good := mustMarshal(t, x, 8)
	// The last name "b" of the copy is the slot of b's segment.
	i := bytes.LastIndex(good, []byte("\x01b"))
	if i < 0 {
		t.Fatal("no segment of b in the copy")
	}
	bad := bytes.Clone(good[:len(good)-4])
	bad[i+1] = 'a'
	bad = binary.LittleEndian.AppendUint32(bad, crc32.Checksum(bad, crc32.MakeTable(crc32.Castagnoli)))
	_, _, err := UnmarshalIndex(bad)
	if !errors.Is(err, ErrIndexDamaged) || !strings.Contains(err.Error(), `slot "b" holds a segment of "a"`) {
		t.Fatalf("UnmarshalIndex = %v, want a damaged copy naming the segment's slot", err)
	}
	if _, _, err := UnmarshalIndex(good); err != nil {
		t.Fatalf("the copy before the change: %v", err)
	}
}
