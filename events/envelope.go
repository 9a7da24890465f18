package events

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

// Event is one entry of the log: a CloudEvent whose data is one of the
// catalog's payloads.
//
// On the wire it is a CloudEvents 1.0 event in binary content mode on NATS
// headers (the NATS protocol binding): ce-specversion, ce-id, ce-source,
// ce-type, ce-time, ce-subject, ce-dataschema, the extensions ce-group,
// ce-slot and ce-claim, traceparent, and content-type for datacontenttype.
// The message body is the JSON data. The log itself is what CloudEvents
// subscribers read.
type Event struct {
	// ID is the CloudEvents id and the Nats-Msg-Id of the append, so a
	// retried append is deduplicated. Empty on write: the store derives it.
	ID string
	// Source is the writer ("/claimstream/provider"); empty means DefaultSource.
	Source string
	// Time is when the transition happened, as the decider's clock read it.
	Time time.Time
	// TraceParent is the W3C trace context of the call that caused the event.
	TraceParent string
	// Epoch is the leadership epoch of the replica that wrote the event
	// (HeaderEpoch); 0 on events written before epochs existed.
	Epoch uint64
	// Data is the payload. It is nil when the log held an entry this reader
	// cannot use (Err says why); Type and Aggregate are still set if the
	// subject could be parsed.
	Data Data

	// Set by the store on append and on read.
	Seq       uint64
	Subject   string
	Type      Type
	Aggregate Aggregate
	Err       error
}

// DefaultSource is the CloudEvents source of events whose writer named none.
const DefaultSource = "/claimstream"

// SpecVersion is the CloudEvents version of the envelope.
const SpecVersion = "1.0"

// CETypePrefix and CETypeVersion build the CloudEvents type of a catalog
// type: dev.claimstream.ClaimFailed.v1.
const (
	CETypePrefix  = "dev.claimstream."
	CETypeVersion = ".v1"
)

// CEType is the CloudEvents type of t.
func CEType(t Type) string { return CETypePrefix + string(t) + CETypeVersion }

// TypeOfCEType reverses CEType.
func TypeOfCEType(ce string) (Type, bool) {
	s, ok := strings.CutPrefix(ce, CETypePrefix)
	if !ok {
		return "", false
	}
	s, ok = strings.CutSuffix(s, CETypeVersion)
	if !ok {
		return "", false
	}
	return Type(s), true
}

// SchemaURL is the dataschema of t: the JSON Schema kept in schemas/events.
func SchemaURL(t Type) string {
	return "https://claimstream.dev/schemas/events/" + string(t) + ".v1.json"
}

// Header names of the binary-mode envelope.
const (
	HeaderSpecVersion = "ce-specversion"
	HeaderID          = "ce-id"
	HeaderSource      = "ce-source"
	HeaderType        = "ce-type"
	HeaderTime        = "ce-time"
	HeaderSubject     = "ce-subject"
	HeaderDataSchema  = "ce-dataschema"
	HeaderGroup       = "ce-group"
	HeaderSlot        = "ce-slot"
	HeaderClaim       = "ce-claim"
	HeaderContentType = "content-type"
	HeaderTraceParent = "traceparent"
	// HeaderCETraceParent is the CloudEvents distributed-tracing
	// extension as the NATS binding names it: a reader that builds the
	// event from ce- headers gets the trace, one that reads NATS's
	// traceparent gets the same value.
	HeaderCETraceParent = "ce-traceparent"
)

// CloudEvent returns the event as an sdk-go CloudEvent, validated.
func (e Event) CloudEvent() (cloudevents.Event, error) {
	if e.Data == nil {
		return cloudevents.Event{}, fmt.Errorf("event %s has no data", e.ID)
	}
	t := e.Data.EventType()
	ref := e.Data.Reference()
	ce := cloudevents.New(SpecVersion)
	ce.SetID(e.ID)
	src := e.Source
	if src == "" {
		src = DefaultSource
	}
	ce.SetSource(src)
	ce.SetType(CEType(t))
	ce.SetTime(e.Time.UTC())
	ce.SetSubject(ceSubjectOf(e.Data))
	ce.SetDataSchema(SchemaURL(t))
	if ref.Group != "" {
		ce.SetExtension("group", ref.Group)
	}
	if ref.Slot != "" {
		ce.SetExtension("slot", ref.Slot)
	}
	if ref.Claim != "" {
		ce.SetExtension("claim", ref.Claim)
	}
	if e.TraceParent != "" {
		ce.SetExtension("traceparent", e.TraceParent)
	}
	if e.Epoch != 0 {
		ce.SetExtension("leaderepoch", strconv.FormatUint(e.Epoch, 10))
	}
	if err := ce.SetData(cloudevents.ApplicationJSON, e.Data); err != nil {
		return cloudevents.Event{}, fmt.Errorf("set %s data: %w", t, err)
	}
	if err := ce.Validate(); err != nil {
		return cloudevents.Event{}, fmt.Errorf("invalid CloudEvent %s: %w", t, err)
	}
	return ce, nil
}

// ceSubject is the CloudEvents subject: the claim when there is one, else
// the slot, else the group.
func ceSubject(r Ref) string {
	switch {
	case r.Claim != "":
		return r.Claim
	case r.Slot != "":
		return r.Slot
	default:
		return r.Group
	}
}

// Encode is the event's binary-mode envelope: the headers (case-sensitive
// keys, as NATS carries them) and the data of the message that stores it.
func (e Event) Encode() (map[string][]string, []byte, error) {
	if h, data, ok := e.encodeDirect(); ok {
		return h, data, nil
	}
	return e.encodeSDK()
}

// encodeSDK is Encode through the sdk-go event (envelope_encode.go).
func (e Event) encodeSDK() (map[string][]string, []byte, error) {
	ce, err := e.CloudEvent()
	if err != nil {
		return nil, nil, err
	}
	h := header{}
	h.set(HeaderSpecVersion, ce.SpecVersion())
	h.set(HeaderID, ce.ID())
	h.set(HeaderSource, ce.Source())
	h.set(HeaderType, ce.Type())
	h.set(HeaderTime, ce.Time().Format(time.RFC3339Nano))
	h.set(HeaderSubject, ce.Subject())
	h.set(HeaderDataSchema, ce.DataSchema())
	h.set(HeaderContentType, ce.DataContentType())
	for _, x := range []struct{ name, header string }{{"group", HeaderGroup}, {"slot", HeaderSlot}, {"claim", HeaderClaim}} {
		if v, ok := ce.Extensions()[x.name]; ok {
			h.set(x.header, fmt.Sprint(v))
		}
	}
	if e.TraceParent != "" {
		h.set(HeaderTraceParent, e.TraceParent)
		h.set(HeaderCETraceParent, e.TraceParent)
	}
	if e.Epoch != 0 {
		h.set(HeaderEpoch, strconv.FormatUint(e.Epoch, 10))
	}
	return h, ce.Data(), nil
}

// header reads and writes message headers as NATS does: keys are
// case-sensitive, and a value set replaces the ones before it.
type header map[string][]string

func (h header) get(key string) string {
	if h == nil {
		return ""
	}
	if v := h[key]; v != nil {
		return v[0]
	}
	return ""
}

func (h header) set(key, value string) { h[key] = []string{value} }

// FromMsg decodes a stored message. It never fails: a message this reader
// cannot use comes back with Data nil and Err set, so the caller can count
// it and go on.
//
// Only the writer's whole envelope is accepted: every header Encode always
// sets must be there and agree with the subject and the data. A message
// without it (a headerless publish, a forged or hand-made one, a JetStream
// API reply that landed on an event subject) is a bad entry, never an
// event.
func FromMsg(subjects Subjects, subject string, seq uint64, headers map[string][]string, data []byte) Event {
	h := header(headers)
	e := Event{Seq: seq, Subject: subject}
	agg, tok, perr := subjects.Parse(subject)
	if perr == nil {
		e.Aggregate = agg
		e.Type = tok
	}
	if h == nil {
		e.Err = fmt.Errorf("seq %d: no CloudEvents headers", seq)
		return e
	}
	if v := h.get(HeaderSpecVersion); v != SpecVersion {
		e.Err = fmt.Errorf("seq %d: ce-specversion %q, want %q", seq, v, SpecVersion)
		return e
	}
	for _, name := range []string{HeaderID, HeaderSource, HeaderType, HeaderTime, HeaderSubject, HeaderDataSchema, HeaderContentType} {
		if h.get(name) == "" {
			e.Err = fmt.Errorf("seq %d: no %s header: not an envelope this writer makes", seq, name)
			return e
		}
	}
	e.ID = h.get(HeaderID)
	e.Source = h.get(HeaderSource)
	// Entries written before ce-traceparent have only traceparent.
	e.TraceParent = h.get(HeaderTraceParent)
	if e.TraceParent == "" {
		e.TraceParent = h.get(HeaderCETraceParent)
	}
	epoch, err := parseEpoch(h.get(HeaderEpoch))
	if err != nil {
		e.Err = fmt.Errorf("seq %d: %w", seq, err)
		return e
	}
	e.Epoch = epoch
	if !parts.sourceRef(e.Source) {
		e.Err = fmt.Errorf("seq %d: ce-source %q is not a URI reference as a writer stores it", seq, e.Source)
		return e
	}
	t, ok := TypeOfCEType(h.get(HeaderType))
	if !ok {
		e.Err = &UnknownTypeError{Type: h.get(HeaderType)}
		return e
	}
	e.Type = t
	if perr != nil {
		e.Err = perr
		return e
	}
	if tok != t {
		e.Err = fmt.Errorf("seq %d: ce-type %s on the subject of %s", seq, t, tok)
		return e
	}
	if _, known := KindOf(t); !known {
		e.Err = &UnknownTypeError{Type: h.get(HeaderType)}
		return e
	}
	if v := h.get(HeaderContentType); v != cloudevents.ApplicationJSON {
		e.Err = fmt.Errorf("seq %d: content-type %q, want %q", seq, v, cloudevents.ApplicationJSON)
		return e
	}
	if v := h.get(HeaderDataSchema); v != SchemaURL(t) {
		e.Err = fmt.Errorf("seq %d: ce-dataschema %q, want %q", seq, v, SchemaURL(t))
		return e
	}
	ts := h.get(HeaderTime)
	tm, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		e.Err = fmt.Errorf("seq %d: ce-time %q: %w", seq, ts, err)
		return e
	}
	e.Time = tm
	d, err := DecodeData(t, data)
	if err != nil {
		e.Err = err
		return e
	}
	if kind, _ := KindOf(t); kind != agg.Kind || AggregateOf(d).Name != agg.Name {
		e.Err = fmt.Errorf("seq %d: %s data names %s, subject names %s", seq, t, AggregateOf(d), agg)
		return e
	}
	if err := checkEnvelopeRefs(h, d); err != nil {
		e.Err = fmt.Errorf("seq %d: %w", seq, err)
		return e
	}
	e.Data = d
	return e
}

// checkEnvelopeRefs checks that ce-subject and the extensions say what the
// data says, as Encode writes them.
func checkEnvelopeRefs(h header, d Data) error {
	r := d.Reference()
	if v, want := h.get(HeaderSubject), ceSubjectOf(d); v != want {
		return fmt.Errorf("ce-subject %q, the data names %q", v, want)
	}
	for _, x := range []struct{ header, want string }{{HeaderGroup, r.Group}, {HeaderSlot, r.Slot}, {HeaderClaim, r.Claim}} {
		if v := h.get(x.header); v != x.want {
			return fmt.Errorf("%s %q, the data names %q", x.header, v, x.want)
		}
	}
	return nil
}
