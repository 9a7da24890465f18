package events

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cetypes "github.com/cloudevents/sdk-go/v2/types"
)

// Writing an envelope through the SDK (CloudEvent, then its headers) parses the
// source and the dataschema URLs, builds and validates an sdk-go event and
// copies its extensions for every event, a large share of an append. The
// envelope is a function of a few attributes that repeat (the writer's
// source, the catalog type), so encodeDirect writes the same headers and
// body itself from what the SDK said of those once (envelopeParts), and
// leaves anything it has not seen checked (a new source past the cache's
// bound, an id or subject the SDK would trim, a zero time) to the SDK
// path. A test and a fuzz test hold the two to the same bytes.

// envelopeParts caches the SDK's word on a source and a type: the source
// and dataschema as the SDK writes them, and whether it accepts them.
type envelopeParts struct {
	mu      sync.RWMutex
	sources map[string]checkedAttr
	schemas map[Type]checkedAttr
	// refs: whether a ce-source read is a URI reference.
	refs map[string]bool
}

type checkedAttr struct {
	value string
	ok    bool
}

// maxCachedSources bounds the sources envelopeParts keeps: a process
// writes under a handful.
const maxCachedSources = 64

var parts = &envelopeParts{sources: map[string]checkedAttr{}, schemas: map[Type]checkedAttr{}, refs: map[string]bool{}}

// source is src as the SDK writes it as ce-source, and whether the SDK
// takes it (cached: false when not known and the cache is full).
func (p *envelopeParts) source(src string) (string, bool) {
	p.mu.RLock()
	c, ok := p.sources[src]
	full := len(p.sources) >= maxCachedSources
	p.mu.RUnlock()
	if ok {
		return c.value, c.ok
	}
	if full {
		return "", false
	}
	ce := cloudevents.New(SpecVersion)
	ce.SetID("id")
	ce.SetType("type")
	ce.SetSource(src)
	c = checkedAttr{value: ce.Source(), ok: ce.Validate() == nil}
	p.mu.Lock()
	p.sources[src] = c
	p.mu.Unlock()
	return c.value, c.ok
}

// sourceRef reports whether src is a URI reference (cetypes.ParseURIRef)
// in the form the SDK writes it, as a reader checks every event's
// ce-source: a writer stores the SDK's string of the parsed URI, so a
// source that parses to another string (" " reads as "%20") was not made
// by a writer and would not survive a round trip. The sources a log holds
// are few and each is parsed once (up to maxCachedSources of them).
func (p *envelopeParts) sourceRef(src string) bool {
	p.mu.RLock()
	ok, known := p.refs[src]
	full := len(p.refs) >= maxCachedSources
	p.mu.RUnlock()
	if known {
		return ok
	}
	u := cetypes.ParseURIRef(src)
	ok = u != nil && u.String() == src
	if !full {
		p.mu.Lock()
		p.refs[src] = ok
		p.mu.Unlock()
	}
	return ok
}

// schema is t's dataschema as the SDK writes it, and whether it takes it.
func (p *envelopeParts) schema(t Type) (string, bool) {
	p.mu.RLock()
	c, ok := p.schemas[t]
	p.mu.RUnlock()
	if ok {
		return c.value, c.ok
	}
	if _, known := catalog[t]; !known {
		return "", false // only the catalog's types are cached: a bounded set
	}
	ce := cloudevents.New(SpecVersion)
	ce.SetID("id")
	ce.SetSource(DefaultSource)
	ce.SetType(CEType(t))
	ce.SetDataSchema(SchemaURL(t))
	c = checkedAttr{value: ce.DataSchema(), ok: ce.Validate() == nil && strings.TrimSpace(CEType(t)) == CEType(t)}
	p.mu.Lock()
	p.schemas[t] = c
	p.mu.Unlock()
	return c.value, c.ok
}

// encodeDirect writes the envelope Encode's SDK path writes, without the
// SDK; ok is false when it cannot vouch for the same result (the caller
// then takes the SDK path).
func (e Event) encodeDirect() (map[string][]string, []byte, bool) {
	if e.Data == nil || e.Time.IsZero() || e.ID == "" || strings.TrimSpace(e.ID) != e.ID {
		return nil, nil, false
	}
	src := e.Source
	if src == "" {
		src = DefaultSource
	}
	source, ok := parts.source(src)
	if !ok {
		return nil, nil, false
	}
	t := e.Data.EventType()
	schema, ok := parts.schema(t)
	if !ok {
		return nil, nil, false
	}
	ceSubj := ceSubjectOf(e.Data)
	if ceSubj == "" || strings.TrimSpace(ceSubj) != ceSubj {
		return nil, nil, false
	}
	data, err := json.Marshal(e.Data)
	if err != nil {
		return nil, nil, false // the SDK path says why, in its words
	}
	// One backing array for the header values: a Set allocates a slice
	// for each.
	h := envelopeHeader{h: make(map[string][]string, 14), vals: make([]string, 0, 14)}
	h.set(HeaderSpecVersion, SpecVersion)
	h.set(HeaderID, e.ID)
	h.set(HeaderSource, source)
	h.set(HeaderType, CEType(t))
	h.set(HeaderTime, e.Time.UTC().Format(time.RFC3339Nano))
	h.set(HeaderSubject, ceSubj)
	h.set(HeaderDataSchema, schema)
	h.set(HeaderContentType, cloudevents.ApplicationJSON)
	ref := e.Data.Reference()
	if ref.Group != "" {
		h.set(HeaderGroup, ref.Group)
	}
	if ref.Slot != "" {
		h.set(HeaderSlot, ref.Slot)
	}
	if ref.Claim != "" {
		h.set(HeaderClaim, ref.Claim)
	}
	if e.TraceParent != "" {
		h.set(HeaderTraceParent, e.TraceParent)
		h.set(HeaderCETraceParent, e.TraceParent)
	}
	if e.Epoch != 0 {
		h.set(HeaderEpoch, strconv.FormatUint(e.Epoch, 10))
	}
	return h.h, data, true
}

// envelopeHeader sets header values out of one backing array.
type envelopeHeader struct {
	h    map[string][]string
	vals []string
}

func (e *envelopeHeader) set(key, value string) {
	e.vals = append(e.vals, value)
	n := len(e.vals)
	e.h[key] = e.vals[n-1 : n : n]
}
