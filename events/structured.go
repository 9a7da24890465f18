package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

// The one shape of an event outside the log: a CloudEvent with the
// claimstream extensions. The REST API's event listing and export, the CLI's
// `events -o json` and `events export`, the command answers and the webhook
// sinks all encode with Structured, so a field has one name everywhere:
//
//	specversion, id, source, type (dev.claimstream.<Type>.v1), subject (the
//	claim, else the slot, else the group), time, datacontenttype,
//	dataschema, data; extensions sequence (the log's sequence, 20 decimal
//	digits, zero-padded: FormatSequence), group, slot, claim, traceparent.
//
// An entry of the log that cannot be read has no data; it is encoded with
// the same names (MarshalStructured) and the extension "error" saying why.

// ExtSequence is the CloudEvents extension carrying the log sequence.
const ExtSequence = "sequence"

// SequenceDigits is the width of the sequence extension: every uint64 fits,
// so the strings sort as the numbers do (the CloudEvents sequence extension
// asks for a lexicographically ordered string; "10" would sort before "9").
const SequenceDigits = 20

// FormatSequence is the sequence extension of the log sequence n.
func FormatSequence(n uint64) string {
	var b [SequenceDigits]byte
	for i := range b {
		b[i] = '0'
	}
	d := strconv.AppendUint(make([]byte, 0, SequenceDigits), n, 10)
	copy(b[SequenceDigits-len(d):], d)
	return string(b[:])
}

// ExtError is the extension of an unreadable entry: why it cannot be read.
const ExtError = "error"

// Structured is the event as a CloudEvent with its log sequence.
func (e Event) Structured() (cloudevents.Event, error) {
	ce, err := e.CloudEvent()
	if err != nil {
		return ce, err
	}
	if e.Seq > 0 {
		ce.SetExtension(ExtSequence, FormatSequence(e.Seq))
	}
	return ce, nil
}

// unreadable is an entry without data, in the structured shape.
type unreadable struct {
	SpecVersion string    `json:"specversion"`
	ID          string    `json:"id,omitempty"`
	Source      string    `json:"source,omitempty"`
	Type        string    `json:"type,omitempty"`
	Time        time.Time `json:"time,omitzero"`
	Sequence    string    `json:"sequence"`
	Error       string    `json:"error"`
}

// MarshalStructured is the JSON of Structured (structured content mode),
// or, for an entry that cannot be read, the same attribute names with the
// error extension.
func MarshalStructured(e Event) ([]byte, error) {
	if e.Data != nil {
		ce, err := e.Structured()
		if err != nil {
			return nil, err
		}
		return json.Marshal(ce)
	}
	u := unreadable{SpecVersion: SpecVersion, ID: e.ID, Source: e.Source, Time: e.Time, Sequence: FormatSequence(e.Seq), Error: "unreadable"}
	if e.Type != "" {
		u.Type = CEType(e.Type)
	}
	if e.Err != nil {
		u.Error = e.Err.Error()
	}
	return json.Marshal(u)
}

// StructuredFields are the top-level names MarshalStructured may write;
// tests check every path against them.
var StructuredFields = []string{
	"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema", "data",
	ExtSequence, "group", "slot", "claim", "traceparent", ExtError,
}

// ParseSequence reads the sequence extension (padded or not: both are the
// same number).
func ParseSequence(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sequence %q: %w", s, err)
	}
	return n, nil
}
