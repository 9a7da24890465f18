package events

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// stdDecode is DecodeData on encoding/json, the reference.
func stdDecode(t Type, b []byte) (Data, error) {
	c, ok := catalog[t]
	if !ok {
		return nil, &UnknownTypeError{Type: string(t)}
	}
	d := c.new()
	if err := json.Unmarshal(b, d); err != nil {
		return nil, err
	}
	return deref(d), nil
}

// sameDecode fails unless DecodeData and encoding/json agree on b: both
// refuse it, or both give the same payload.
func sameDecode(t testing.TB, typ Type, b []byte) {
	t.Helper()
	got, gerr := DecodeData(typ, b)
	want, werr := stdDecode(typ, b)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%s %q: DecodeData error %v, encoding/json's %v", typ, b, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %q:\nDecodeData    %#v\nencoding/json %#v", typ, b, got, want)
	}
}

// decodeSeeds are payloads of every type as the writer writes them, and
// the odd inputs encoding/json has rules for.
func decodeSeeds(t testing.TB) map[Type][][]byte {
	out := map[Type][][]byte{}
	at := time.Date(2026, 11, 30, 12, 0, 0, 5, time.UTC)
	for _, typ := range Types() {
		d := sampleOf(t, typ, "g", "s-1", "c-1")
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		out[typ] = append(out[typ], b,
			[]byte(`{"GROUP":"g","Slot":"s","claim":null,"cause":"x","attempt":2}`),
			[]byte(`{"group":"g","group":"h","unknown":[1,{"a":2}],"attempt":1.5}`),
			[]byte(`{"group":"\ud800","slot":"\u00e9\xff","deadlineAt":"`+at.Format(time.RFC3339Nano)+`","ttl":"1h30m","budget":"bad"}`),
			[]byte(`null`), []byte(`[]`), []byte(`{"attempt":"2"}`), []byte(`{"group":1}`), []byte(`{`), []byte(``))
	}
	return out
}

// DecodeData gives what encoding/json gives, for every type of the
// catalog: the payloads the writer writes and the odd ones.
func TestDecodeDataDecodesAsEncodingJSON(t *testing.T) {
	for typ, inputs := range decodeSeeds(t) {
		for _, b := range inputs {
			sameDecode(t, typ, b)
		}
	}
}

// A decode costs fewer allocations than encoding/json's.
func TestDecodeDataAllocatesLessThanEncodingJSON(t *testing.T) {
	d := sampleOf(t, TypeClaimCreated, "g", "s-1", "c-1")
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	ours := testing.AllocsPerRun(200, func() { _, _ = DecodeData(TypeClaimCreated, b) })
	std := testing.AllocsPerRun(200, func() { _, _ = stdDecode(TypeClaimCreated, b) })
	t.Logf("DecodeData %.0f allocations, encoding/json %.0f", ours, std)
	if ours >= std {
		t.Fatalf("DecodeData %.0f allocations, encoding/json %.0f: want fewer", ours, std)
	}
}

func FuzzDecodeDataDecodesAsEncodingJSON(f *testing.F) {
	types := Types()
	for i, typ := range types {
		for _, b := range decodeSeeds(f)[typ] {
			f.Add(uint8(i), b)
		}
	}
	f.Fuzz(func(t *testing.T, typ uint8, b []byte) {
		sameDecode(t, types[int(typ)%len(types)], b)
	})
}
