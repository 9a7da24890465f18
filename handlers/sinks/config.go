package sinks

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/claimstream/claimstream/events"
)

// Config is the sinks file (--sinks FILE).
type Config struct {
	Sinks []Sink `yaml:"sinks"`
}

// Mode is how a sink's HTTP requests carry the CloudEvent.
type Mode string

const (
	// ModeBinary: attributes in ce-* headers, the JSON data as the body
	// (the default).
	ModeBinary Mode = "binary"
	// ModeStructured: the whole event as one application/cloudevents+json
	// body.
	ModeStructured Mode = "structured"
)

// Start is where a new sink's durable consumer begins. An existing
// consumer always resumes where it left off.
type Start string

const (
	// StartNew delivers only events appended after the sink was first
	// started (the default: a new alerting sink is not flooded with the
	// history).
	StartNew Start = "new"
	// StartAll delivers the whole log first.
	StartAll Start = "all"
)

// Backoff bounds the waits between the attempts of one delivery: Initial,
// doubled after each failure, capped at Max.
type Backoff struct {
	Initial time.Duration `yaml:"initial"`
	Max     time.Duration `yaml:"max"`
}

// Defaults of a sink.
const (
	DefaultMaxAttempts    = 5
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = time.Minute
	DefaultTimeout        = 10 * time.Second
)

// Sink is one HTTP webhook that receives the log's events as CloudEvents.
type Sink struct {
	// Name names the sink's durable consumer (sink-<name>) and its
	// dead-letter subject; [A-Za-z0-9_-]+, unique.
	Name string `yaml:"name"`
	// URL is the webhook (http or https).
	URL string `yaml:"url"`
	// Types are the event types it receives ("ClaimFailed", or the
	// CloudEvents type "dev.claimstream.ClaimFailed.v1"); empty: all.
	Types []string `yaml:"types"`
	// Slots and Groups, when set, restrict it to events of those slots /
	// groups (both set: both must match).
	Slots  []string `yaml:"slots"`
	Groups []string `yaml:"groups"`
	// Mode is binary (default) or structured.
	Mode Mode `yaml:"mode"`
	// Headers are added to every request, each value exactly as given (a
	// file's valueFrom already read; see headers.go). Reserved headers
	// (Ce-*, Content-Type, Host, Traceparent, ...) and values with a
	// control character are refused.
	Headers map[string]string `yaml:"headers"`
	// headerFrom names where a header's value was read (for messages).
	headerFrom map[string]string
	// MaxAttempts bounds the attempts of one event (default 5) before it is
	// dead-lettered.
	MaxAttempts int     `yaml:"maxAttempts"`
	Backoff     Backoff `yaml:"backoff"`
	// Timeout bounds one HTTP request (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// DeadLetter (default true): after MaxAttempts failed attempts the
	// event is recorded on the dead-letter stream and the sink goes on.
	// false: the sink holds at the event and keeps retrying at the
	// backoff's maximum, skipping nothing.
	DeadLetter *bool `yaml:"deadLetter"`
	// Start is where a new sink begins: new (default) or all.
	Start Start `yaml:"start"`
}

var sinkName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// normalize fills the defaults and validates; the error names the first
// field wrong (a Config built in code; a file reports every problem).
func (s *Sink) normalize() error {
	if ps := s.validate(); len(ps) > 0 {
		return fmt.Errorf("%s: %s", ps[0].field, ps[0].msg)
	}
	return nil
}

// fieldProblem is one wrong field of a sink: its name as written in the
// file (url, types[1], backoff.max) and what is wrong.
type fieldProblem struct{ field, msg string }

// validate fills the defaults and returns every problem of s.
func (s *Sink) validate() []fieldProblem {
	var ps []fieldProblem
	add := func(field, format string, args ...any) {
		ps = append(ps, fieldProblem{field, fmt.Sprintf(format, args...)})
	}
	if !sinkName.MatchString(s.Name) {
		if s.Name == "" {
			add("name", "required: letters, digits, '-' and '_'")
		} else {
			add("name", "%q must be only letters, digits, '-' and '_'", s.Name)
		}
	}
	u, err := url.Parse(s.URL)
	switch {
	case s.URL == "":
		add("url", "required: the webhook's http(s) URL")
	case err != nil:
		// Shown without its credentials, as everywhere (RedactURL).
		add("url", "%q is not a URL: %s", RedactURL(s.URL), RedactText(errors.Unwrap(err).Error()))
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		add("url", "%q is not an http(s) URL", RedactURL(s.URL))
	}
	for i, t := range s.Types {
		typ := events.Type(t)
		if ct, ok := events.TypeOfCEType(t); ok {
			typ = ct
		}
		if !events.Known(typ) {
			add(fmt.Sprintf("types[%d]", i), "unknown event type %q (docs/events.md lists them)", t)
			continue
		}
		s.Types[i] = string(typ)
	}
	switch s.Mode {
	case "":
		s.Mode = ModeBinary
	case ModeBinary, ModeStructured:
	default:
		add("mode", "%q, want binary or structured", s.Mode)
	}
	switch s.Start {
	case "":
		s.Start = StartNew
	case StartNew, StartAll:
	default:
		add("start", "%q, want new or all", s.Start)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		if msg := headerProblem(k, s.Headers[k], s.headerFrom[k]); msg != "" {
			add("headers."+k, "%s", msg)
		}
	}
	switch {
	case s.MaxAttempts < 0:
		add("maxAttempts", "%d is negative", s.MaxAttempts)
	case s.MaxAttempts == 0:
		s.MaxAttempts = DefaultMaxAttempts
	}
	backoffOK := true
	if s.Backoff.Initial < 0 {
		add("backoff.initial", "%s is negative", s.Backoff.Initial)
		backoffOK = false
	}
	if s.Backoff.Max < 0 {
		add("backoff.max", "%s is negative", s.Backoff.Max)
		backoffOK = false
	}
	if backoffOK {
		if s.Backoff.Initial == 0 {
			s.Backoff.Initial = DefaultBackoffInitial
		}
		if s.Backoff.Max == 0 {
			s.Backoff.Max = max(DefaultBackoffMax, s.Backoff.Initial)
		}
		if s.Backoff.Max < s.Backoff.Initial {
			add("backoff.max", "%s is below backoff.initial %s", s.Backoff.Max, s.Backoff.Initial)
		}
	}
	switch {
	case s.Timeout < 0:
		add("timeout", "%s is negative", s.Timeout)
	case s.Timeout == 0:
		s.Timeout = DefaultTimeout
	}
	if s.DeadLetter == nil {
		t := true
		s.DeadLetter = &t
	}
	return ps
}

// clone copies s so that normalizing it leaves the caller's slices alone.
func (s Sink) clone() Sink {
	s.Types = slices.Clone(s.Types)
	s.Slots = slices.Clone(s.Slots)
	s.Groups = slices.Clone(s.Groups)
	s.Headers = maps.Clone(s.Headers)
	s.headerFrom = maps.Clone(s.headerFrom)
	if s.DeadLetter != nil {
		d := *s.DeadLetter
		s.DeadLetter = &d
	}
	return s
}

// DeadLetters reports whether the sink dead-letters (default true).
func (s Sink) DeadLetters() bool { return s.DeadLetter == nil || *s.DeadLetter }

// ConsumerName is the durable consumer of the sink.
func (s Sink) ConsumerName() string { return "sink-" + s.Name }

// FilterSubjects are the subjects of the sink's consumer: one per type
// (cs.slot.*.ClaimFailed), or the whole log when no type is named.
func (s Sink) FilterSubjects(subjects events.Subjects) []string {
	if len(s.Types) == 0 {
		return []string{subjects.All()}
	}
	out := make([]string, 0, len(s.Types))
	seen := map[string]bool{}
	for _, t := range s.Types {
		kind, ok := events.KindOf(events.Type(t))
		if !ok {
			continue
		}
		f := subjects.TypeFilter(kind, events.Type(t))
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// Wants reports whether the sink receives e (types, slots and groups).
func (s Sink) Wants(e events.Event) bool {
	if e.Data == nil {
		return false
	}
	if len(s.Types) > 0 && !slices.Contains(s.Types, string(e.Data.EventType())) {
		return false
	}
	ref := e.Data.Reference()
	if len(s.Slots) > 0 && !slices.Contains(s.Slots, ref.Slot) {
		return false
	}
	if len(s.Groups) > 0 && !slices.Contains(s.Groups, ref.Group) {
		return false
	}
	return true
}
