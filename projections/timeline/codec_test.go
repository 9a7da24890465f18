package timeline

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// seedTimelineIndex is a small index with every part of a copy: slots with
// intervals, an open interval, a claim that failed, a retired slot, events
// whose times are not in the log's order.
func seedTimelineIndex() *folding {
	x := foldLifecycles(3, 7)
	at := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	seq := x.st.Seq
	fold := func(d events.Data) {
		seq++
		at = at.Add(time.Minute)
		x.fold(events.Event{Seq: seq, ID: "seed-" + itoa(seq), Time: at, Type: d.EventType(), Aggregate: events.AggregateOf(d), Data: d})
	}
	r := events.Ref{Claim: "node-0.lan-failing", Slot: "node-0.lan", Group: "g", Attempt: 1}
	for _, d := range scaledDownLifecycle(r, r.Slot, at)[:2] {
		fold(d)
	}
	fold(events.ClaimFailed{Ref: r, Reason: "BootTimeout"})
	r.Claim = "node-1.lan-open"
	r.Slot = "node-1.lan"
	for _, d := range scaledDownLifecycle(r, r.Slot, at)[:3] {
		fold(d)
	}
	fold(events.SlotRetired{Ref: events.Ref{Slot: "node-2.lan", Group: "g"}})
	// An event stamped before the one before it: the log's order is not
	// always the time's.
	at = at.Add(-2 * time.Hour)
	fold(events.GroupDeclared{Ref: events.Ref{Group: "g"}})
	return x
}

// A copy decodes to an index that encodes back to the same bytes and cuts
// the same timelines.
func TestTimelineIndexCopyRoundTrips(t *testing.T) {
	x := seedTimelineIndex()
	b := mustMarshal(t, x)
	y := fromContents(t, b)
	again := mustMarshal(t, y)
	if !bytes.Equal(again, b) {
		t.Fatalf("the decoded copy encodes to %d bytes, not the %d it was read from", len(again), len(b))
	}
	var written bytes.Buffer
	if err := x.WritePart(&written); err != nil || !bytes.Equal(written.Bytes(), b) {
		t.Fatalf("the part written as it is encoded (%d bytes, %v) is not the copy (%d)", written.Len(), err, len(b))
	}
	since, until := time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	if g, w := cutOf(t, y, since, until), cutOf(t, x.Index, since, until); g != w {
		t.Fatalf("from the copy:\n%s\nfrom the fold:\n%s", g, w)
	}
	if len(x.slots["node-0.lan"].fails) != 1 || !x.slots["node-2.lan"].retired.After(since) || x.slots["node-1.lan"].open.phase == noPhase {
		t.Fatal("the seed lacks a failure, a retired slot or an open interval")
	}
}

// A copy cut short or altered anywhere is refused as damaged.
func TestTimelineIndexCopyRefusesDamage(t *testing.T) {
	b := mustMarshal(t, seedTimelineIndex())
	for _, n := range []int{0, 4, 5, len(b) / 2, len(b) - 1} {
		if _, err := unmarshalTimelineIndex(b[:n]); !errors.Is(err, errCopyDamaged) {
			t.Fatalf("cut to %d of %d bytes: %v, want errCopyDamaged", n, len(b), err)
		}
	}
	for _, i := range []int{4, 9, len(b) / 3, len(b) - 2} {
		c := bytes.Clone(b)
		c[i] ^= 1
		if _, err := unmarshalTimelineIndex(c); !errors.Is(err, errCopyDamaged) {
			t.Fatalf("byte %d altered: %v, want errCopyDamaged", i, err)
		}
	}
}

// fromContents is an index started from the copy b.
func fromContents(t testing.TB, b []byte) *Index {
	t.Helper()
	y, err := restored(b)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// restored is an index restored from part b, over views at its seq.
func restored(b []byte) (*Index, error) {
	c, err := unmarshalTimelineIndex(b)
	if err != nil {
		return nil, err
	}
	y := &Index{}
	st := projections.NewState()
	st.Seq = c.seq
	return y, y.Restore(st, bytes.NewReader(b))
}

// cutOf is x's timeline of [since, until), spelled out, without reading a
// log (the index holds every event).
func cutOf(t testing.TB, x *Index, since, until time.Time) string {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	tl, err := x.cut(since, until, until)
	if err != nil {
		t.Fatal(err)
	}
	return barsOf(tl) + fmtFailures(tl)
}

func fmtFailures(tl Timeline) string {
	var b bytes.Buffer
	for k := 0; k+3 < len(tl.Failures); k += 4 {
		b.WriteString(tl.Slots[tl.Failures[k]] + " " + itoa(uint64(tl.Failures[k+1])) + " " + tl.Claims[tl.Failures[k+2]] + " " + tl.Reasons[tl.Failures[k+3]] + "\n")
	}
	return b.String()
}

// unmarshalTimelineIndex never panics; what it refuses wraps
// errCopyDamaged, and what it accepts encodes back to a copy that
// decodes again and cuts timelines.
func FuzzUnmarshalTimelineIndex(f *testing.F) {
	f.Add(mustMarshal(f, seedTimelineIndex()))
	f.Add([]byte("CSTL\x03"))
	f.Add(mustMarshal(f, foldLifecycles(1, 0)))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Read from a stream, the copy is decoded before its checksum is
		// checked: it must refuse or accept as the whole copy is.
		_, whole := unmarshalTimelineIndex(b)
		if _, streamed := unmarshalTimelineFrom(bytes.NewReader(b), len(b), nil); (whole == nil) != (streamed == nil) || streamed != nil && !errors.Is(streamed, errCopyDamaged) {
			t.Fatalf("whole: %v; streamed: %v", whole, streamed)
		}
		y, err := restored(b)
		if err != nil {
			if !errors.Is(err, errCopyDamaged) {
				t.Fatalf("refused without errCopyDamaged: %v", err)
			}
			return
		}
		again := mustMarshal(t, y)
		if _, err := unmarshalTimelineIndex(again); err != nil {
			t.Fatalf("an accepted copy encodes to one refused: %v", err)
		}
		cutOf(t, y, y.heldFrom, y.heldFrom.Add(1000*time.Hour))
	})
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// mustMarshal is x's copy.
func mustMarshal(t interface {
	Helper()
	Fatalf(string, ...any)
}, x interface{ marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := x.marshal()
	if err != nil {
		t.Fatalf("marshalling the timeline index: %v", err)
	}
	return b
}
