package events_test

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

var subjects = events.Subjects{Prefix: "cs"}

func goodMsg(t testing.TB) *nats.Msg {
	t.Helper()
	e := eventstest.Created("node.lan", "c1")
	e.ID, e.Source, e.TraceParent = "id-1", "/claimstream/test", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	m, err := eventlog.ToMsg(e, subjects.Subject(events.SlotAggregate("node.lan"), events.TypeClaimCreated))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFromMsgAcceptsTheWritersEnvelope(t *testing.T) {
	m := goodMsg(t)
	e := events.FromMsg(subjects, m.Subject, 7, m.Header, m.Data)
	if e.Err != nil || e.Data == nil || e.ID != "id-1" || e.Type != events.TypeClaimCreated || e.Aggregate != events.SlotAggregate("node.lan") || !e.Time.Equal(eventstest.T0) {
		t.Fatalf("decoded %+v", e)
	}
}

// A message without the writer's whole envelope is a bad entry, never an
// event: an outside client with a NATS connection published forged events
// without one.
func TestFromMsgRefusesAnIncompleteOrForgedEnvelope(t *testing.T) {
	cases := map[string]func(m *nats.Msg){
		"no headers":     func(m *nats.Msg) { m.Header = nil },
		"wrong subject":  func(m *nats.Msg) { m.Subject = "cs.slot.node%2Elan.ClaimReady" },
		"ce-subject":     func(m *nats.Msg) { m.Header.Set(events.HeaderSubject, "c2") },
		"ce-slot":        func(m *nats.Msg) { m.Header.Set(events.HeaderSlot, "other") },
		"ce-group":       func(m *nats.Msg) { m.Header.Del(events.HeaderGroup) },
		"ce-claim":       func(m *nats.Msg) { m.Header.Set(events.HeaderClaim, "c9") },
		"dataschema":     func(m *nats.Msg) { m.Header.Set(events.HeaderDataSchema, "https://example.com/x.json") },
		"content-type":   func(m *nats.Msg) { m.Header.Set(events.HeaderContentType, "text/plain") },
		"specversion":    func(m *nats.Msg) { m.Header.Set(events.HeaderSpecVersion, "0.3") },
		"time":           func(m *nats.Msg) { m.Header.Set(events.HeaderTime, "yesterday") },
		"data elsewhere": func(m *nats.Msg) { m.Subject = "cs.slot.other.ClaimCreated" },
		// A writer stores the SDK's string of the source; " " parses but
		// is written "%20", so it comes from no writer (found by the fuzzer).
		"source not as written": func(m *nats.Msg) { m.Header.Set(events.HeaderSource, " ") },
		"source not a URI":      func(m *nats.Msg) { m.Header.Set(events.HeaderSource, "%zz") },
	}
	for _, h := range []string{events.HeaderSpecVersion, events.HeaderID, events.HeaderSource, events.HeaderType, events.HeaderTime, events.HeaderSubject, events.HeaderDataSchema, events.HeaderContentType} {
		cases["without "+h] = func(m *nats.Msg) { m.Header.Del(h) }
	}
	for name, spoil := range cases {
		m := goodMsg(t)
		spoil(m)
		e := events.FromMsg(subjects, m.Subject, 7, m.Header, m.Data)
		if e.Err == nil || e.Data != nil {
			t.Errorf("%s: accepted %+v", name, e)
		}
	}
}

// encodeHeader writes h as "name: value" lines, the fuzzer's form.
func encodeHeader(h nats.Header) []byte {
	var b bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	return b.Bytes()
}

func decodeHeader(b []byte) nats.Header {
	if len(b) == 0 {
		return nil
	}
	h := nats.Header{}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok {
			h[k] = append(h[k], v)
		}
	}
	return h
}

// FuzzFromMsg: the envelope decoder never panics on any headers, subject
// and data, and whatever it accepts round-trips: encoding the event and
// decoding it again gives the same event and the same message.
func FuzzFromMsg(f *testing.F) {
	m := goodMsg(f)
	f.Add(m.Subject, uint64(1), encodeHeader(m.Header), m.Data)
	f.Add(m.Subject, uint64(2), []byte{}, m.Data)
	f.Add("cs.group.g.GroupDeclared", uint64(3), encodeHeader(m.Header), []byte(`{"group":"g"}`))
	f.Add(m.Subject, uint64(4), encodeHeader(m.Header), []byte(`{"claim":"c1","slot":"node.lan","group":"g\u00e9","requestedAt":"2026-03-04T09:38:15+02:00"}`))
	withEpoch := goodMsg(f)
	withEpoch.Header.Set(events.HeaderEpoch, "4")
	f.Add(withEpoch.Subject, uint64(6), encodeHeader(withEpoch.Header), withEpoch.Data)
	le := leaderElectedMsg(f, 4)
	f.Add(le.Subject, uint64(7), encodeHeader(le.Header), le.Data)
	bad := goodMsg(f)
	bad.Header.Set(events.HeaderSource, "%zz")
	f.Add(bad.Subject, uint64(5), encodeHeader(bad.Header), bad.Data)
	spaced := goodMsg(f)
	spaced.Header.Set(events.HeaderSource, " ")
	f.Add(spaced.Subject, uint64(5), encodeHeader(spaced.Header), spaced.Data)
	f.Fuzz(func(t *testing.T, subject string, seq uint64, header, data []byte) {
		e := events.FromMsg(subjects, subject, seq, decodeHeader(header), data)
		if e.Err == nil && e.Data == nil || e.Err != nil && e.Data != nil {
			t.Fatalf("Err %v with Data %v", e.Err, e.Data)
		}
		if e.Err != nil {
			return
		}
		m1, err := eventlog.ToMsg(e, subject)
		if err != nil {
			t.Fatalf("accepted but cannot encode: %v", err)
		}
		e2 := events.FromMsg(subjects, subject, seq, m1.Header, m1.Data)
		if e2.Err != nil {
			t.Fatalf("re-encoded event refused: %v", e2.Err)
		}
		if e2.ID != e.ID || e2.Source != e.Source || e2.TraceParent != e.TraceParent || !e2.Time.Equal(e.Time) ||
			e2.Epoch != e.Epoch || e2.Type != e.Type || e2.Aggregate != e.Aggregate || e2.Subject != e.Subject || e2.Seq != e.Seq {
			t.Fatalf("round trip changed the event:\n%+v\n%+v", e, e2)
		}
		m2, err := eventlog.ToMsg(e2, subject)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m1.Data, m2.Data) || !bytes.Equal(encodeHeader(m1.Header), encodeHeader(m2.Header)) {
			t.Fatalf("round trip changed the message:\n%s %s\n%s %s", encodeHeader(m1.Header), m1.Data, encodeHeader(m2.Header), m2.Data)
		}
	})
}

// BenchmarkFromMsg is the decode of one stored event, the half of a replay
// that is not the server's.
//
//	go test ./events -run '^$' -bench FromMsg -count 5
func BenchmarkFromMsg(b *testing.B) {
	m := goodMsg(b)
	b.ReportAllocs()
	for b.Loop() {
		if e := events.FromMsg(subjects, m.Subject, 1, m.Header, m.Data); e.Err != nil {
			b.Fatal(e.Err)
		}
	}
}
