package events_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
)

// natsSpecs reads ce- prefixed headers as sdk-go's NATS binding does.
var natsSpecs = spec.WithPrefix("ce-")

var (
	attributeName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)
	w3cTrace      = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)
)

// A message of the log, as a subscriber (or the subscribers' copy, a mirror
// of it) reads it, follows the NATS protocol binding in binary mode: every
// CloudEvents attribute and extension is a ce- header with a lower-case
// attribute name, datacontenttype is content-type, and the event those
// headers make passes sdk-go's Validate, with the trace as the
// distributed-tracing extension (ce-traceparent). The only other headers
// are NATS's own: Nats-* (Nats-Msg-Id, the deduplication id, is the ce-id)
// and traceparent, the same W3C trace context as NATS tracing carries it.
func TestLogMessagesFollowTheNATSBinding(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	e := eventstest.Created("node-1", "c1")
	e.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := st.Append(ctx, events.SlotAggregate("node-1"), 0, e)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := st.JetStream().Stream(ctx, st.Stream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetMsg(ctx, res.Last)
	if err != nil {
		t.Fatal(err)
	}
	v := natsSpecs.Version(m.Header.Get(natsSpecs.PrefixedSpecVersionName()))
	if v == nil {
		t.Fatalf("ce-specversion %q: not a CloudEvents version", m.Header.Get("ce-specversion"))
	}
	ce := event.New(v.String())
	for k, vals := range m.Header {
		if len(vals) != 1 {
			t.Fatalf("header %s has %d values", k, len(vals))
		}
		key := strings.ToLower(k)
		name, isCE := strings.CutPrefix(key, "ce-")
		switch {
		case isCE && !attributeName.MatchString(name):
			t.Fatalf("header %s: not a CloudEvents attribute name", k)
		case isCE && v.Attribute(key) != nil:
			if err := v.Attribute(key).Set(ce.Context, vals[0]); err != nil {
				t.Fatalf("header %s: %v", k, err)
			}
		case isCE:
			ce.SetExtension(name, vals[0])
		case key == "content-type":
			ce.SetDataContentType(vals[0])
		case key == "nats-msg-id" && vals[0] != m.Header.Get("ce-id"):
			t.Fatalf("Nats-Msg-Id %q is not the ce-id %q", vals[0], m.Header.Get("ce-id"))
		case strings.HasPrefix(key, "nats-"):
			// NATS's own (the id, and what a direct get adds).
		case key == "traceparent":
			if !w3cTrace.MatchString(vals[0]) {
				t.Fatalf("traceparent %q: not W3C trace context", vals[0])
			}
		default:
			t.Fatalf("header %s: neither a ce- attribute nor a NATS header", k)
		}
	}
	if err := ce.SetData(ce.DataContentType(), m.Data); err != nil {
		t.Fatal(err)
	}
	if err := ce.Validate(); err != nil {
		t.Fatalf("the log's message is not a valid CloudEvent: %v", err)
	}
	if ce.Type() != events.CEType(events.TypeClaimCreated) || ce.Subject() != "c1" || ce.Extensions()["slot"] != "node-1" {
		t.Fatalf("the binding read %v", ce)
	}
	if got := ce.Extensions()["traceparent"]; got != e.TraceParent {
		t.Fatalf("the binding read the traceparent extension %v, want %s", got, e.TraceParent)
	}
	if got := m.Header.Get("traceparent"); got != e.TraceParent {
		t.Fatalf("NATS's traceparent %q, want %s", got, e.TraceParent)
	}
}

// An entry written before ce-traceparent, with NATS's traceparent alone,
// reads with its trace; so does one with the extension alone.
func TestTraceParentReadsFromEitherHeader(t *testing.T) {
	m := goodMsg(t)
	tp := m.Header.Get(events.HeaderTraceParent)
	for _, drop := range []string{events.HeaderCETraceParent, events.HeaderTraceParent} {
		h := map[string][]string{}
		for k, v := range m.Header {
			if k != drop {
				h[k] = v
			}
		}
		got := events.FromMsg(subjects, m.Subject, 1, h, m.Data)
		if got.Err != nil || tp == "" || got.TraceParent != tp {
			t.Fatalf("without %s: traceparent %q, %v", drop, got.TraceParent, got.Err)
		}
	}
}

// The sequence extension is 20 digits and sorts as the numbers do, at the
// edges too, and reads back.
func TestFormatSequenceSortsAsTheNumbers(t *testing.T) {
	seqs := []uint64{0, 1, 9, 10, 99, 100, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, ^uint64(0)}
	for i, n := range seqs {
		s := events.FormatSequence(n)
		if len(s) != events.SequenceDigits {
			t.Fatalf("%d: %q is not %d digits", n, s, events.SequenceDigits)
		}
		if back, err := events.ParseSequence(s); err != nil || back != n {
			t.Fatalf("%q reads back as %d, %v", s, back, err)
		}
		if i > 0 && events.FormatSequence(seqs[i-1]) >= s {
			t.Fatalf("%q sorts at or after %q", events.FormatSequence(seqs[i-1]), s)
		}
	}
}

func BenchmarkMarshalStructured(b *testing.B) {
	e := eventstest.Created("node-1", "c1")
	e.ID, e.Seq = "0123456789abcdef0123456789abcdef", 123456
	for b.Loop() {
		if _, err := events.MarshalStructured(e); err != nil {
			b.Fatal(err)
		}
	}
}
