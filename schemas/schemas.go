// Package schemas holds claimstream's JSON Schemas (draft 2020-12) and
// validates data against them offline.
//
// The directory holds:
//
//   - events/<Type>.v1.json: the schema of the data of one event type, the
//     CloudEvents dataschema https://claimstream.dev/schemas/events/<Type>.v1.json
//     (events.SchemaURL). Each describes what encoding/json writes for the Go
//     struct of package events: the fields it always writes are required,
//     unknown fields are allowed (an additive change of a newer writer), and
//     known fields are checked strictly.
//   - events/defs.v1.json: the definitions the event schemas share (the fields
//     of events.Ref, events.Duration, Taint, GroupSpec, SlotSpec, NodeTemplate,
//     Request, NodeState, ...).
//   - pool.schema.json: the schema of the pool file.
//
// Every file is embedded in FS and registered under its $id, so a $ref
// between them resolves without network. This package is a leaf: it imports
// nothing else of claimstream, so that anything may use it.
package schemas

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FS holds the schema files, under their paths in this directory
// ("events/ClaimCreated.v1.json", "pool.schema.json").
//
//go:embed events/*.json *.json
var FS embed.FS

const (
	// eventDir and eventSuffix locate the schema of an event type:
	// events/<Type>.v1.json.
	eventDir    = "events"
	eventSuffix = ".v1.json"
	// defsName is the file of shared definitions in eventDir, not a type.
	defsName = "defs"
	// eventIDPrefix is the start of the $id of an event schema; it must
	// agree with events.SchemaURL.
	eventIDPrefix = "https://claimstream.dev/schemas/events/"
	// fallbackIDPrefix names an embedded file that declares no $id.
	fallbackIDPrefix = "https://claimstream.dev/schemas/"
)

// EventTypes returns the event types that have a schema in FS, sorted.
func EventTypes() []string { return slices.Clone(eventTypes()) }

var eventTypes = sync.OnceValue(func() []string {
	names, _ := fs.Glob(FS, eventDir+"/*"+eventSuffix) // the pattern is valid
	var types []string
	for _, n := range names {
		if t, ok := eventTypeOf(n); ok {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	return types
})

// registry is the compiler loaded with every embedded file and the event
// schemas compiled so far. mu guards compiler and compiled: a Compiler is not
// safe for concurrent use, while a compiled Schema is.
type registry struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]compiled
}

type compiled struct {
	schema *jsonschema.Schema
	err    error
}

var loadRegistry = sync.OnceValues(func() (*registry, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // times are "format": "date-time"
	names, err := fs.Glob(FS, eventDir+"/*.json")
	if err != nil {
		return nil, err
	}
	top, err := fs.Glob(FS, "*.json")
	if err != nil {
		return nil, err
	}
	for _, name := range append(names, top...) {
		b, err := FS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", name, err)
		}
		id, _ := idOf(doc)
		if id == "" {
			id = fallbackIDPrefix + name
		}
		if t, ok := eventTypeOf(name); ok && id != eventIDPrefix+t+eventSuffix {
			return nil, fmt.Errorf("schemas: %s: $id is %q, want %q", name, id, eventIDPrefix+t+eventSuffix)
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", name, err)
		}
	}
	return &registry{compiler: c, compiled: map[string]compiled{}}, nil
})

// idOf returns the $id of a schema document.
func idOf(doc any) (string, bool) {
	m, ok := doc.(map[string]any)
	if !ok {
		return "", false
	}
	id, ok := m["$id"].(string)
	return id, ok
}

// eventTypeOf returns the type whose schema the file name holds.
func eventTypeOf(name string) (string, bool) {
	dir, file := path.Split(name)
	t, ok := strings.CutSuffix(file, eventSuffix)
	if !ok || dir != eventDir+"/" || t == defsName || t == "" {
		return "", false
	}
	return t, true
}

// schema returns the compiled schema of eventType, compiling it on first use.
func (r *registry) schema(eventType string) (*jsonschema.Schema, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.compiled[eventType]; ok {
		return c.schema, c.err
	}
	s, err := r.compiler.Compile(eventIDPrefix + eventType + eventSuffix)
	if err != nil {
		err = fmt.Errorf("schemas: compile the schema of %s: %w", eventType, err)
	}
	r.compiled[eventType] = compiled{s, err}
	return s, err
}

// ValidateEvent checks the JSON data of an event of type eventType
// ("ClaimCreated") against the type's schema. The error names the type and,
// for each failure, the JSON pointer of the value at fault and what is wrong
// with it; it wraps the *jsonschema.ValidationError. An eventType without a
// schema is an error naming it.
func ValidateEvent(eventType string, data []byte) error {
	if _, found := slices.BinarySearch(eventTypes(), eventType); !found {
		return fmt.Errorf("schemas: no schema for event type %q", eventType)
	}
	r, err := loadRegistry()
	if err != nil {
		return err
	}
	s, err := r.schema(eventType)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("schemas: %s data is not JSON: %w", eventType, err)
	}
	if err := s.Validate(v); err != nil {
		ve, ok := err.(*jsonschema.ValidationError)
		if !ok {
			return fmt.Errorf("schemas: validate %s data: %w", eventType, err)
		}
		return &invalidError{eventType: eventType, cause: ve}
	}
	return nil
}

// invalidError is data that does not match its type's schema.
type invalidError struct {
	eventType string
	cause     *jsonschema.ValidationError
}

// Error lists the leaves of the validation error tree, one
// "at '<pointer>': <message>" each.
func (e *invalidError) Error() string {
	var leaves []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if len(u.Errors) == 0 {
			if u.Error != nil {
				leaves = append(leaves, fmt.Sprintf("at '%s': %s", u.InstanceLocation, u.Error))
			}
			return
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*e.cause.DetailedOutput())
	return fmt.Sprintf("schemas: invalid %s data: %s", e.eventType, strings.Join(leaves, "; "))
}

func (e *invalidError) Unwrap() error { return e.cause }
