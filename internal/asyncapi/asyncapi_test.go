package asyncapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/asyncapi"
)

func root(t *testing.T) string {
	t.Helper()
	return filepath.Join("..", "..")
}

// The committed docs/asyncapi.yaml is what the generator writes: a change
// of the catalog or of a schema without `go tool task generate:asyncapi`
// fails here (and so in CI).
func TestCommittedDocumentIsGenerated(t *testing.T) {
	want, err := asyncapi.Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root(t), asyncapi.Path))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the generator's output: run `go tool task generate:asyncapi`", asyncapi.Path)
	}
}

type document struct {
	AsyncAPI   string                     `json:"asyncapi"`
	Channels   map[string]channel         `json:"channels"`
	Operations map[string]json.RawMessage `json:"operations"`
	Components struct {
		Messages map[string]struct {
			Headers json.RawMessage `json:"headers"`
			Payload struct {
				Ref string `json:"$ref"`
			} `json:"payload"`
		} `json:"messages"`
		Schemas map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

type channel struct {
	Address string `json:"address"`
}

func load(t *testing.T) (document, []byte) {
	t.Helper()
	doc, err := asyncapi.Generate()
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatalf("not YAML: %v", err)
	}
	var d document
	if err := json.Unmarshal(js, &d); err != nil {
		t.Fatal(err)
	}
	return d, js
}

// Every type of the catalog has its channel (the subject it is written to),
// a receive operation and a message whose payload is its schema file (whose
// $id is the type's dataschema); every local $ref resolves.
func TestDocumentCoversTheCatalog(t *testing.T) {
	d, js := load(t)
	if d.AsyncAPI != "3.0.0" {
		t.Fatalf("asyncapi %q", d.AsyncAPI)
	}
	subjects := events.Subjects{Prefix: "cs"}
	for _, ty := range events.Types() {
		ch, ok := d.Channels[string(ty)]
		if !ok {
			t.Errorf("%s has no channel", ty)
			continue
		}
		kind, _ := events.KindOf(ty)
		agg := events.Aggregate{Kind: kind, Name: "node-1"}
		if kind == events.KindLeadership {
			agg = events.Leadership()
		}
		if got := strings.ReplaceAll(ch.Address, "{"+string(kind)+"}", "node-1"); got != subjects.Subject(agg, ty) {
			t.Errorf("%s: address %q, the store writes %q", ty, ch.Address, subjects.Subject(agg, ty))
		}
		if _, ok := d.Operations["receive"+string(ty)]; !ok {
			t.Errorf("%s has no operation", ty)
		}
		m, ok := d.Components.Messages[string(ty)]
		if !ok {
			t.Errorf("%s has no message", ty)
			continue
		}
		raw, err := os.ReadFile(filepath.Join(root(t), "docs", m.Payload.Ref))
		if err != nil {
			t.Errorf("%s: payload %s: %v", ty, m.Payload.Ref, err)
			continue
		}
		var s struct {
			ID string `json:"$id"`
		}
		if err := json.Unmarshal(raw, &s); err != nil || s.ID != events.SchemaURL(ty) {
			t.Errorf("%s: payload %s has $id %q, want %q (%v)", ty, m.Payload.Ref, s.ID, events.SchemaURL(ty), err)
		}
	}
	if len(d.Channels) != len(events.Types()) {
		t.Errorf("%d channels for %d types", len(d.Channels), len(events.Types()))
	}
	var all any
	_ = json.Unmarshal(js, &all)
	walkRefs(all, func(ref string) {
		if !strings.HasPrefix(ref, "#/") {
			return
		}
		node := all
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, _ := node.(map[string]any)
			node = m[part]
		}
		if node == nil {
			t.Errorf("$ref %s resolves to nothing", ref)
		}
	})
}

func walkRefs(v any, fn func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" {
				fn(s)
			}
			walkRefs(e, fn)
		}
	case []any:
		for _, e := range x {
			walkRefs(e, fn)
		}
	}
}

// The document's header schema holds for a message the store wrote, as a
// subscriber reads it: what it says of the headers is what they are.
func TestEnvelopeSchemaFitsTheLog(t *testing.T) {
	d, _ := load(t)
	c := jsonschema.NewCompiler()
	var env, msgHeaders any
	if err := json.Unmarshal(d.Components.Schemas["Envelope"], &env); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(d.Components.Messages[string(events.TypeClaimCreated)].Headers, &msgHeaders); err != nil {
		t.Fatal(err)
	}
	// The message's headers refer to the envelope by a local $ref: give the
	// compiler one document holding both.
	if err := c.AddResource("mem://doc.json", map[string]any{"components": map[string]any{"schemas": map[string]any{"Envelope": env}}, "h": msgHeaders}); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://doc.json#/h")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	res, err := st.Append(ctx, events.SlotAggregate("node-1"), 0, events.Event{Time: t0, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Epoch: 3, Data: events.ClaimCreated{
		Ref:         events.Ref{Claim: "c1", Slot: "node-1", Group: "g", Attempt: 1, Cause: "test"},
		RequestedAt: t0, RequestedBy: "test", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"},
		DeadlineAt: t0.Add(12 * time.Minute), Budget: events.Duration(12 * time.Minute), TTL: events.Duration(time.Hour),
	}})
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
	headers := map[string]any{}
	for k, v := range m.Header {
		headers[k] = v[0]
	}
	if err := sch.Validate(headers); err != nil {
		t.Fatalf("the log's headers do not fit the document's: %v\n%v", err, headers)
	}
	headers["ce-type"] = events.CEType(events.TypeClaimReady)
	if err := sch.Validate(headers); err == nil {
		t.Fatal("the header schema takes another type's ce-type: it checks nothing")
	}
}
