package events_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/claimstream/claimstream/events"
)

// FuzzDecodeRecordedSideEffects feeds arbitrary bytes to the decoder of the
// events that record a side effect or a pause (data read from the log,
// which anything with the NATS port can write): it never panics, and what
// it accepts encodes and decodes back to the same value.
func FuzzDecodeRecordedSideEffects(f *testing.F) {
	types := []events.Type{events.TypeUnclaimedShutdownPaused, events.TypeNodeDeleteRequested, events.TypeFailedInstanceDeleted, events.TypeJobObserved}
	f.Add(uint8(0), []byte(`{"slot":"a","group":"g","cause":"input law","attempts":3,"pausedUntil":"2026-03-04T09:30:00Z"}`))
	f.Add(uint8(1), []byte(`{"slot":"a","group":"g","cause":"node cleanup","node":"a","why":"NotReady"}`))
	f.Add(uint8(2), []byte(`{"claim":"a-1","slot":"a","group":"g","cause":"DeleteNodes","requestedBy":"ca","request":{"call":"DeleteNodes","group":"g","nodes":["homelab://a"]}}`))
	f.Add(uint8(3), []byte(`{"claim":"a-1","slot":"a","group":"g","attempt":1,"cause":"boot: startup Job created","job":"a-1-start-1","operation":"startup","created":true}`))
	f.Add(uint8(3), []byte(`{"job":7,"created":"yes"}`))
	f.Add(uint8(0), []byte(`{"pausedUntil":"yesterday"}`))
	f.Add(uint8(2), []byte(`[]`))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		typ := types[int(which)%len(types)]
		d, err := events.DecodeData(typ, data)
		if err != nil {
			return
		}
		if d.EventType() != typ {
			t.Fatalf("decoded %s as %s", typ, d.EventType())
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("encode %T: %v", d, err)
		}
		again, err := events.DecodeData(typ, b)
		if err != nil {
			t.Fatalf("decode what was encoded (%s): %v", b, err)
		}
		if !reflect.DeepEqual(normalize(t, d), normalize(t, again)) {
			t.Fatalf("round trip changed the value:\n%#v\n%#v", d, again)
		}
	})
}

// normalize compares by JSON form (times lose their monotonic and zone
// details in a round trip).
func normalize(t *testing.T, d events.Data) string {
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
