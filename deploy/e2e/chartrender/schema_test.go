package chartrender

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A misspelled key is refused, at every level the chart owns, naming the
// key: it would otherwise be ignored and the default silently used.
func TestSchemaRefusesMisspelledKeys(t *testing.T) {
	for _, c := range []struct{ doc, key string }{
		{"replcas: 3", "replcas"},
		{"clusterAutoscaler: {enabeld: true}", "enabeld"},
		{"clusterAutoscaler: {image: {tga: v1}}", "tga"},
		{"metrics: {serviceMonitor: {enabeld: true}}", "enabeld"},
		{"metrics: {prometheusRule: {lables: {a: b}}}", "lables"},
		{"metrics: {dashboard: {lable: x}}", "lable"},
		{"tls: {certManager: {issuerRef: {nmae: corp}}}", "nmae"},
		{"networkPolicy: {monitoring: {namespaceSelector: {matchLabel: {a: b}}}}", "matchLabel"},
		{"networkPolicy: {api: {podSelecter: {}}}", "podSelecter"},
		{"probes: {startup: {failureTreshold: 5}}", "failureTreshold"},
		{"nats: {cluster: {prot: 6222}}", "prot"},
		{"persistence: {retenion: 1d}", "retenion"},
		{"rest: {tsl: true}", "tsl"},
		{"docs: {baseUrl: https://example.org}", "baseUrl"},
	} {
		t.Run(c.key, func(t *testing.T) {
			mustErr(t, c.doc, c.key)
		})
	}
}

// Wrong types and values are refused too.
func TestSchemaRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"metrics: {serviceMonitor: {interval: often}}", "interval"},
		{"docs: {baseURL: docs}", "baseURL"},
		{"nats: {cluster: {port: 70000}}", "port"},
		{"rest: {tls: yes-please}", "tls"},
		{"probes: {readiness: {periodSeconds: 0}}", "periodSeconds"},
	} {
		mustErr(t, c.doc, c.want)
	}
}

// Every object the schema describes refuses unknown keys, but for the pool
// file (schemas/pool.schema.json; claimstream checks it whole) and what the
// chart hands to Kubernetes as is: so a key added to the chart without
// "additionalProperties": false fails here.
func TestSchemaIsStrictEverywhere(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(ChartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		props, ok := node["properties"].(map[string]any)
		if !ok {
			return
		}
		if node["additionalProperties"] != false && path != "/pool/config" {
			t.Errorf("%s: has properties but does not refuse others (additionalProperties: false)", path)
		}
		for k, v := range props {
			walk(path+"/"+k, v.(map[string]any))
		}
	}
	walk("", schema)
	defs, _ := schema["definitions"].(map[string]any)
	for name, def := range defs {
		walk("#/definitions/"+name, def.(map[string]any))
	}
	if schema["additionalProperties"] != false {
		t.Error("the top level accepts unknown keys")
	}
}

func TestDefaultValuesPass(t *testing.T) {
	objs := mustRender(t, "")
	for _, o := range objs {
		if o.GetKind() == "" || o.GetName() == "" {
			t.Errorf("object without kind or name: %v", o.Object)
		}
	}
}

// fencedYAML returns the ```yaml blocks of a Markdown file. A block whose
// info string says more than yaml ("```yaml cloud-config") is another
// file's example and is left out.
var fence = regexp.MustCompile("(?ms)^```([^\\n]*)\\n(.*?)^```")

func fencedYAML(md string) []string {
	var out []string
	for _, m := range fence.FindAllStringSubmatch(md, -1) {
		if strings.TrimSpace(m[1]) == "yaml" {
			out = append(out, m[2])
		}
	}
	return out
}

// Every values example of docs/install.md renders with the schema on.
func TestDocsValuesExamplesPass(t *testing.T) {
	blocks := fencedYAML(repoFile(t, "docs/install.md"))
	if len(blocks) < 4 {
		t.Fatalf("only %d values examples in docs/install.md", len(blocks))
	}
	for i, b := range blocks {
		if _, err := Render("claimstream", "ns", values(t, b)); err != nil {
			t.Errorf("docs/install.md values example %d:\n%s\n%v", i+1, b, err)
		}
	}
}
