package pool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/claimstream/claimstream/schemas"
)

// SchemaFile is the pool file's JSON Schema inside schemas.FS.
const SchemaFile = "pool.schema.json"

const schemaURL = "file:///claimstream/schemas/" + SchemaFile

var compiled struct {
	once   sync.Once
	schema *jsonschema.Schema
	doc    any // the raw schema, to name allowed keys in hints
	err    error
}

// poolSchema compiles the embedded schema once.
func poolSchema() (*jsonschema.Schema, any, error) {
	compiled.once.Do(func() {
		data, err := schemas.FS.ReadFile(SchemaFile)
		if err != nil {
			compiled.err = fmt.Errorf("pool schema: %w", err)
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			compiled.err = fmt.Errorf("pool schema %s: %w", SchemaFile, err)
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(schemaURL, doc); err != nil {
			compiled.err = fmt.Errorf("pool schema %s: %w", SchemaFile, err)
			return
		}
		sch, err := c.Compile(schemaURL)
		if err != nil {
			compiled.err = fmt.Errorf("pool schema %s: %w", SchemaFile, err)
			return
		}
		compiled.schema, compiled.doc = sch, doc
	})
	return compiled.schema, compiled.doc, compiled.err
}

// validateSchema checks the tree against the pool schema and turns every
// failure into a Problem at the line of the value it is about.
func validateSchema(t *tree) ([]Problem, error) {
	sch, doc, err := poolSchema()
	if err != nil {
		return nil, err
	}
	root := t.root
	if root == nil {
		// An empty file is an empty object for the schema (it then misses
		// "groups").
		root = map[string]any{}
	}
	err = sch.Validate(root)
	if err == nil {
		return nil, nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return nil, fmt.Errorf("pool schema: %w", err)
	}
	var out []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		out = append(out, translate(t, doc, e)...)
	}
	walk(ve)
	return out, nil
}

// The patterns the schema uses, recognised to word their failures.
const (
	namePattern     = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	durationPattern = `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
)

func translate(t *tree, doc any, e *jsonschema.ValidationError) []Problem {
	ptr := pointer(e.InstanceLocation...)
	at := func(msg string, args ...any) []Problem {
		return []Problem{{Line: t.line(ptr), Path: t.path(ptr), Msg: fmt.Sprintf(msg, args...)}}
	}
	got, _ := t.get(ptr)
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		allowed := allowedKeys(doc, e.SchemaURL)
		var out []Problem
		for _, p := range k.Properties {
			pp := ptr + "/" + escapeToken(p)
			msg := "unknown field"
			if s := suggest(p, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			out = append(out, Problem{Line: t.line(pp), Path: t.path(pp), Msg: msg})
		}
		return out
	case *kind.Required:
		var out []Problem
		for _, p := range k.Missing {
			pp := ptr + "/" + escapeToken(p)
			out = append(out, Problem{Line: t.line(ptr), Path: t.path(pp), Msg: "is required"})
		}
		return out
	case *kind.Type:
		var want []string
		for _, w := range k.Want {
			want = append(want, jsonTypeWord(w))
		}
		return at("must be %s (got %s)", strings.Join(want, " or "), describe(got))
	case *kind.Enum:
		var want []string
		for _, w := range k.Want {
			want = append(want, describe(w))
		}
		return at("must be one of %s (got %s)", strings.Join(want, ", "), describe(got))
	case *kind.Const:
		return at("must be %s (got %s)", describe(k.Want), describe(got))
	case *kind.Minimum:
		return at("must be >= %s (got %s)", rat(k.Want), describe(got))
	case *kind.Maximum:
		return at("must be <= %s (got %s)", rat(k.Want), describe(got))
	case *kind.ExclusiveMinimum:
		return at("must be > %s (got %s)", rat(k.Want), describe(got))
	case *kind.ExclusiveMaximum:
		return at("must be < %s (got %s)", rat(k.Want), describe(got))
	case *kind.MinLength:
		if k.Want == 1 {
			return at("must not be empty")
		}
		return at("must be at least %d characters long (got %d)", k.Want, k.Got)
	case *kind.MaxLength:
		return at("must be at most %d characters long (got %d)", k.Want, k.Got)
	case *kind.MinItems:
		return at("must have at least %d items (got %d)", k.Want, k.Got)
	case *kind.MaxItems:
		return at("must have at most %d items (got %d)", k.Want, k.Got)
	case *kind.Pattern:
		switch k.Want {
		case namePattern:
			return at("must be a DNS-1123 subdomain name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (got %q)", k.Got)
		case durationPattern:
			if d, err := time.ParseDuration(k.Got); err == nil && d < 0 {
				return at("must not be negative (got %q)", k.Got)
			}
			return at("must be a Go duration such as \"90s\", \"5m\" or \"1h30m\" (got %q)", k.Got)
		}
		return at("must match %s (got %q)", k.Want, k.Got)
	}
	return at("%s", e.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
}

// allowedKeys lists the properties of the schema object at schemaURL (its
// fragment is a JSON pointer into the schema document).
func allowedKeys(doc any, schemaURL string) []string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	v := doc
	if frag != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[unescapeToken(tok)]
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	var out []string
	for k := range props {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// suggest returns the allowed key an unknown key was probably meant to be:
// the same but for case, or within two edits.
func suggest(key string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if strings.EqualFold(a, key) {
			return a
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(a)); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func jsonTypeWord(t string) string {
	switch t {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "null":
		return "null"
	}
	return t
}

// describe shows a value in an error: strings quoted, numbers as written,
// mappings and lists by kind.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("%q", x)
	case json.Number:
		return x.String()
	case bool:
		return fmt.Sprint(x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}
