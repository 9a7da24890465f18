package events

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// AggregateKind is the kind of consistency boundary an event belongs to.
type AggregateKind string

const (
	// KindSlot: a slot with its claims. One live claim per slot makes the
	// slot the boundary every claim decision is checked against.
	KindSlot AggregateKind = "slot"
	// KindGroup: group-level config and scale decisions.
	KindGroup AggregateKind = "group"
)

// Aggregate names one consistency boundary: a slot or a group.
type Aggregate struct {
	Kind AggregateKind
	Name string
}

// SlotAggregate is the aggregate of one slot.
func SlotAggregate(name string) Aggregate { return Aggregate{Kind: KindSlot, Name: name} }

// GroupAggregate is the aggregate of one group.
func GroupAggregate(name string) Aggregate { return Aggregate{Kind: KindGroup, Name: name} }

func (a Aggregate) String() string { return string(a.Kind) + "/" + a.Name }

// Subjects builds and parses the NATS subjects of a stream whose subjects
// live under Prefix (default "cs"): <prefix>.slot.<slot>.<Type> and
// <prefix>.group.<group>.<Type>.
type Subjects struct{ Prefix string }

// Subject is the subject an event of type t on aggregate a is written to.
func (s Subjects) Subject(a Aggregate, t Type) string {
	return s.Prefix + "." + string(a.Kind) + "." + EncodeToken(a.Name) + "." + string(t)
}

// Filter is the wildcard subject that covers every event of aggregate a. All
// writers to an aggregate use this exact string as their expectation filter
// (a clustered stream serializes in-flight expectations per filter string).
func (s Subjects) Filter(a Aggregate) string {
	return s.Prefix + "." + string(a.Kind) + "." + EncodeToken(a.Name) + ".>"
}

// All is the filter of the whole log.
func (s Subjects) All() string { return s.Prefix + ".>" }

// TypeFilter covers every event of type t on aggregates of kind k, for
// subscribers ("cs.slot.*.ClaimFailed").
func (s Subjects) TypeFilter(k AggregateKind, t Type) string {
	return s.Prefix + "." + string(k) + ".*." + string(t)
}

// Parse splits a subject into its aggregate and type token.
func (s Subjects) Parse(subject string) (Aggregate, Type, error) {
	rest, ok := strings.CutPrefix(subject, s.Prefix+".")
	if !ok {
		return Aggregate{}, "", fmt.Errorf("subject %q is not under %q", subject, s.Prefix)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return Aggregate{}, "", fmt.Errorf("subject %q: want %s.<kind>.<name>.<Type>", subject, s.Prefix)
	}
	kind := AggregateKind(parts[0])
	if kind != KindSlot && kind != KindGroup && kind != KindLeadership {
		return Aggregate{}, "", fmt.Errorf("subject %q: unknown aggregate kind %q", subject, parts[0])
	}
	name, err := DecodeToken(parts[1])
	if err != nil {
		return Aggregate{}, "", fmt.Errorf("subject %q: %w", subject, err)
	}
	return Aggregate{Kind: kind, Name: name}, Type(parts[2]), nil
}

// EncodeToken turns a name into one NATS subject token, reversibly.
// Kubernetes names may contain dots, which NATS reads as token separators;
// every byte outside [A-Za-z0-9_-] is written as %XX, so "node.lan" is
// "node%2Elan" and no name can reach a wildcard or a separator.
func EncodeToken(name string) string {
	if name == "" {
		return "%"
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// DecodeToken reverses EncodeToken.
func DecodeToken(tok string) (string, error) {
	if tok == "%" {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(tok) {
			return "", fmt.Errorf("token %q: truncated escape", tok)
		}
		v, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("token %q: bad escape %q", tok, tok[i:i+3])
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

func sortTypes(ts []Type) { sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] }) }

func deref(d Data) Data {
	return reflect.ValueOf(d).Elem().Interface().(Data)
}
