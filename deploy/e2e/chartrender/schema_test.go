package chartrender

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
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

// A pool.config serve would refuse at start is refused at render time,
// before `helm upgrade` rolls the pods: by the schema generated from
// schemas/pool.schema.json, and by the chart's checks of the cross-field
// rules. The error names the field.
func TestChartRefusesAPoolServeWouldRefuse(t *testing.T) {
	for _, c := range []struct{ name, pool, want string }{
		{"negative maxSize", `{groups: [{name: lab, maxSize: -1}], slots: [{name: n1, group: lab}]}`, "maxSize"},
		{"unknown group field", `{groups: [{name: lab, maxSise: 1}], slots: [{name: n1, group: lab}]}`, "maxSise"},
		{"unknown slot field", `{groups: [{name: lab}], slots: [{name: n1, group: lab, startUp: {}}]}`, "startUp"},
		{"unknown top-level field", `{groups: [{name: lab}], slot: [{name: n1, group: lab}]}`, "slot"},
		{"bad name", `{groups: [{name: Lab_1}]}`, "name"},
		{"bad duration", `{groups: [{name: lab, claimTTL: soon}], slots: [{name: n1, group: lab}]}`, "claimTTL"},
		{"undeclared group", `{groups: [{name: lab}], slots: [{name: n1, group: nope}]}`, `pool.config.slots[0].group: group "nope" is not declared`},
		{"duplicate group", `{groups: [{name: lab}, {name: lab}]}`, `pool.config.groups[1].name: duplicate group name "lab"`},
		{"duplicate slot", `{groups: [{name: lab}], slots: [{name: n1, group: lab}, {name: n1, group: lab}]}`, `pool.config.slots[1].name: duplicate slot name "n1"`},
		{"minSize above maxSize", `{groups: [{name: lab, minSize: 2, maxSize: 1}], slots: [{name: n1, group: lab}, {name: n2, group: lab}]}`, "pool.config.groups[0].minSize: must be <= maxSize 1 (got 2)"},
		{"maxSize above the slots", `{groups: [{name: lab, maxSize: 2}], slots: [{name: n1, group: lab}]}`, `pool.config.groups[0].maxSize: must be <= 1, the number of slots of group "lab" (got 2)`},
		{"minSize above the slots", `{groups: [{name: lab, minSize: 2}], slots: [{name: n1, group: lab}]}`, `pool.config.groups[0].minSize: must be <= 1, the number of slots of group "lab" (got 2)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustErr(t, "pool: {config: "+c.pool+"}", c.want)
		})
	}
}

// Pools serve accepts render: a group without slots yet, maxSize 0 (no
// limit), the examples' fields, and an existing ConfigMap (not checked
// here: the chart does not have it). A pool.config without slots keeps
// the default's (Helm merges maps, not lists), so "slots: []" says none.
func TestChartAcceptsAPoolServeAccepts(t *testing.T) {
	for _, doc := range []string{
		`pool: {config: {groups: [{name: lab}], slots: []}}`,
		`pool: {config: {groups: [{name: lab, minSize: 1, maxSize: 0}, {name: b.lab, maxSize: 2}], slots: [{name: n1, group: lab}, {name: n2.b.lab, group: b.lab}, {name: n3, group: b.lab}]}}`,
		`pool: {config: {groups: [{name: lab, claimTTL: 1h30m, lifecycle: {startupJobTimeout: 5m}, template: {capacity: {cpu: 4, memory: 16Gi}}}], slots: [{name: n1, group: lab, capacity: {cpu: "8"}}]}}`,
		`pool: {existingConfigMap: my-pool}`,
	} {
		if _, err := Render("claimstream", "ns", values(t, doc)); err != nil {
			t.Errorf("values %s: %v", doc, err)
		}
	}
}

// The pool of deploy/examples/pool.yaml, the file the docs start from,
// renders as pool.config.
func TestChartAcceptsTheExamplePool(t *testing.T) {
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(repoFile(t, "deploy/examples/pool.yaml")), &cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := Render("claimstream", "ns", map[string]any{"pool": map[string]any{"config": cfg}}); err != nil {
		t.Fatal(err)
	}
}
