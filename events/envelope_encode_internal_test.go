package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// sampleOf is a payload of type t naming group, slot and claim (and the
// replica of a LeaderElected).
func sampleOf(t testing.TB, typ Type, group, slot, claim string) Data {
	t.Helper()
	b, err := json.Marshal(map[string]any{"group": group, "slot": slot, "claim": claim, "replica": claim, "cause": "a test"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeData(typ, b)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return d
}

// sameEnvelope fails unless Encode and the SDK's envelope agree: both
// refuse, or both write the same headers and body.
func sameEnvelope(t testing.TB, e Event) {
	t.Helper()
	wantH, wantData, werr := e.encodeSDK()
	gotH, gotData, gerr := e.Encode()
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%+v: Encode error %v, the SDK's %v", e, gerr, werr)
	}
	if werr != nil {
		return
	}
	if !reflect.DeepEqual(gotH, wantH) || !bytes.Equal(gotData, wantData) {
		t.Fatalf("%+v:\nEncode  %v %s\nthe SDK %v %s", e, gotH, gotData, wantH, wantData)
	}
}

// Encode writes, without the SDK, the envelope the SDK writes: for every
// type of the catalog, and for the odd ids, sources and times the SDK
// trims, refuses or leaves out.
func TestEncodeWritesTheSDKsEnvelopeForEveryType(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	for _, typ := range Types() {
		for _, ref := range [][3]string{{"g", "s-1", "c-1"}, {"g", "s-1", ""}, {"g", "", ""}} {
			d := sampleOf(t, typ, ref[0], ref[1], ref[2])
			e := Event{ID: "id-1", Time: at, Data: d}
			sameEnvelope(t, e)
			if _, _, ok := e.encodeDirect(); !ok && ceSubjectOf(d) != "" {
				t.Fatalf("%s: an ordinary event took the SDK's path", typ)
			}
			e.Source, e.TraceParent, e.Epoch = "/claimstream/provider", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", 7
			sameEnvelope(t, e)
		}
	}
	d := sampleOf(t, TypeClaimCreated, "g", "s-1", "c-1")
	for name, e := range map[string]Event{
		"padded id":        {ID: " id-1 ", Time: at, Data: d},
		"no id":            {Time: at, Data: d},
		"blank id":         {ID: "  ", Time: at, Data: d},
		"zero time":        {ID: "id-1", Data: d},
		"absolute source":  {ID: "id-1", Time: at, Data: d, Source: "https://claimstream.dev/a b"},
		"bad source":       {ID: "id-1", Time: at, Data: d, Source: "%zz"},
		"padded subject":   {ID: "id-1", Time: at, Data: sampleOf(t, TypeClaimCreated, "g", "s-1", " c-1 ")},
		"blank subject":    {ID: "id-1", Time: at, Data: sampleOf(t, TypeGroupDeclared, " ", "", "")},
		"no data":          {ID: "id-1", Time: at},
		"leader elected":   {ID: "id-1", Time: at, Data: sampleOf(t, TypeLeaderElected, "", "", "replica-2")},
		"unicode":          {ID: "é", Time: at, Data: sampleOf(t, TypeClaimCreated, "g", "s-é", "c-\u00a0")},
		"source with path": {ID: "id-1", Time: at, Data: d, Source: "/claimstream/whatif"},
	} {
		t.Run(name, func(t *testing.T) { sameEnvelope(t, e) })
	}
}

// Writing an envelope costs a fraction of the SDK's allocations.
func TestEncodeAllocatesLessThanTheSDK(t *testing.T) {
	e := Event{ID: "id-1", Source: "/claimstream/provider", Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Data: sampleOf(t, TypeClaimCreated, "g", "s-1", "c-1")}
	direct := testing.AllocsPerRun(100, func() { _, _, _ = e.Encode() })
	sdk := testing.AllocsPerRun(100, func() { _, _, _ = e.encodeSDK() })
	t.Logf("Encode %.0f allocations, the SDK's %.0f", direct, sdk)
	if direct*2 > sdk {
		t.Fatalf("Encode %.0f allocations, the SDK's %.0f: want at most half", direct, sdk)
	}
}

func FuzzEncodeWritesTheSDKsEnvelope(f *testing.F) {
	f.Add("id-1", "/claimstream/provider", "g", "s-1", "c-1", "", uint64(0), uint8(0), int64(1700000000123456789))
	f.Add(" x", "%zz", "", " ", "c", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", uint64(3), uint8(5), int64(0))
	f.Add("id", "https://a b/c?d#e", "g", "", "", "tp", uint64(1<<63), uint8(200), int64(-62135596800000000))
	types := Types()
	f.Fuzz(func(t *testing.T, id, source, group, slot, claim, tp string, epoch uint64, typ uint8, unixNano int64) {
		d := sampleOf(t, types[int(typ)%len(types)], group, slot, claim)
		var at time.Time
		if unixNano != 0 {
			at = time.Unix(0, unixNano)
		}
		sameEnvelope(t, Event{ID: id, Source: source, Time: at, TraceParent: tp, Epoch: epoch, Data: d})
	})
}
