package projections

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
)

// FuzzDecodeSnapshot: a snapshot or checkpoint read from the object store
// decodes the same by the one-pass reader as by the whole-envelope one (or
// both refuse it), and never panics.
func FuzzDecodeSnapshot(f *testing.F) {
	st := NewState()
	at := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	_ = Evolve(st, events.Event{Seq: 1, Time: at, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}}})
	_ = Evolve(st, events.Event{Seq: 2, Time: at, Data: events.SlotDeclared{Ref: events.Ref{Slot: "a", Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://a"}}})
	good, _, err := encodeSnapshot(st)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"seq":2,"version":3,"state":{"seq":2}}`))
	f.Add([]byte(`{"version":2,"seq":5,"state":{"seq":4}}`))
	f.Add([]byte(`{"version":3,"seq":0,"state":{}} {}`))
	f.Add([]byte(`{"version":3,"seq":1,"state":{"seq":1},"extra":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, fastErr := DecodeSnapshot(b)
		slow, slowErr := decodeSnapshotEnvelope(b)
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
