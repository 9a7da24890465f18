package chartschema_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/internal/chartschema"
)

const root = "../.."

// The committed values schema is what the generator writes: a change of
// the pool schema without `go tool task generate:chartschema` fails here
// (and so in CI).
func TestCommittedValuesSchemaIsGenerated(t *testing.T) {
	want, err := chartschema.Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, chartschema.ValuesSchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the generator's output: run `go tool task generate:chartschema`", chartschema.ValuesSchemaPath)
	}
}

// The generator keeps the hand-written part of the values schema byte for
// byte, and running it twice changes nothing.
func TestMergeKeepsTheRestAsWritten(t *testing.T) {
	pool := []byte(`{"$schema": "x", "$defs": {"n": {"type": "string"}}, "type": "object", "properties": {"groups": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}`)
	values := []byte(`{
  "definitions": {
    "b": {
      "description": "a <= b & c"
    },
    "pool-old": {}
  },
  "properties": {
    "pool": {
      "properties": {
        "config": {},
        "z": 1.50
      }
    }
  }
}
`)
	once, err := chartschema.Merge(pool, values)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"description": "a <= b & c"`, `"z": 1.50`, `"$ref": "#/definitions/pool-n"`, `"pool-n": {`} {
		if !strings.Contains(string(once), want) {
			t.Errorf("merged schema lacks %s:\n%s", want, once)
		}
	}
	if strings.Contains(string(once), "pool-old") || strings.Contains(string(once), "$defs") {
		t.Errorf("merged schema keeps an old pool definition or a $defs ref:\n%s", once)
	}
	twice, err := chartschema.Merge(pool, once)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(once, twice) {
		t.Errorf("merging again changed the schema:\n%s\nthen\n%s", once, twice)
	}
}

// The pool schema is 2020-12 and Helm validates draft-07: the pool
// schema may use only the keywords both drafts read alike.
func TestPoolSchemaUsesOnlyDraft07Keywords(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, chartschema.PoolSchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, k := range strings.Fields(`$schema $id $defs $ref title description type enum const
		properties additionalProperties required items minItems maxItems uniqueItems
		minLength maxLength pattern minimum maximum exclusiveMinimum exclusiveMaximum multipleOf
		minProperties maxProperties default examples`) {
		allowed[k] = true
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				if !allowed[k] {
					t.Errorf("%s: keyword %q: check that draft-07 reads it as 2020-12 does, then allow it here", path, k)
				}
				switch k {
				case "properties", "$defs":
					for name, s := range sub.(map[string]any) {
						walk(path+"/"+k+"/"+name, s)
					}
				case "enum", "const", "default", "examples", "required", "type":
				default:
					walk(path+"/"+k, sub)
				}
			}
		case []any:
			for _, e := range x {
				walk(path, e)
			}
		}
	}
	walk("#", schema)
}
