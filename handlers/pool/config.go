// Package pool reads the pool file (the declared node groups and slots,
// docs/design.md) and reconciles the event log with it.
//
// A pool file is checked in four passes, and every problem of every pass is
// reported at once, each naming the file, line and field:
//
//  1. YAML syntax (go.yaml.in/yaml/v3, keeping the node tree and its lines);
//  2. the JSON Schema schemas/pool.schema.json (types, unknown fields,
//     enums, minimums, name and duration forms);
//  3. semantic checks (unique names and providerIDs, declared groups,
//     minSize <= maxSize <= slots, builtin maxNodes <= slots, durations,
//     Kubernetes quantities, label keys, pod specs decoded strictly into
//     core/v1.PodSpec);
//  4. decoding into events.GroupSpec / events.SlotSpec, with defaults.
//
// Reconcile then turns a Config and the views into the config events that
// make the views match the file, and Applier writes them through the
// command service one group per decision (ReconcileGroup, GroupCommand),
// each decision within eventlog.MaxEventsPerAppend.
package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Config is a parsed, checked pool file with its defaults applied.
type Config struct {
	// Source names the file in errors and in the Cause of the events it
	// leads to.
	Source string
	// Groups and Slots are in file order.
	Groups []Group
	Slots  []Slot
}

// Group is one declared node group.
type Group struct {
	Name string
	Spec events.GroupSpec
	// Line is where the group's entry starts in Source (0 if not from a file).
	Line int

	lines entryLines // where its reported fields are (filelines.go)
}

// Slot is one declared slot: one machine, named like its Kubernetes Node.
type Slot struct {
	Name  string
	Group string
	Spec  events.SlotSpec
	// Line is where the slot's entry starts in Source (0 if not from a file).
	Line int

	lines entryLines // where its reported fields are (filelines.go)
}

// DefaultProviderID is the providerID of a slot that declares none.
func DefaultProviderID(slot string) string { return events.DefaultProviderID(slot) }

// Load reads (ReadFile) and parses the pool file at path. Problems with
// its content come back as a *ConfigError.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pool file: %w", err)
	}
	return Parse(path, data)
}

// MaxFileBytes bounds a pool file (and the CLI's config file): far above
// any real pool, far below what would strain the process to parse.
const MaxFileBytes = 8 << 20

// ReadFile reads a config file: a regular file of at most MaxFileBytes.
// Anything else (a directory, a FIFO that would block the read, a device
// such as /dev/zero that never ends) is refused before it is read.
func ReadFile(path string) ([]byte, error) {
	// Non-blocking, so opening a FIFO does not wait for a writer; it
	// changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s): give the path of a YAML file", path, fileKind(fi.Mode()))
	}
	tooBig := func(n int64) error {
		return fmt.Errorf("%s: %d bytes, more than the limit of %d (%d MiB): a pool file this large is not one", path, n, MaxFileBytes, MaxFileBytes>>20)
	}
	if fi.Size() > MaxFileBytes {
		return nil, tooBig(fi.Size())
	}
	// Read at most one byte past the limit: the file may grow meanwhile.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, tooBig(int64(len(data)))
	}
	return data, nil
}

// fileKind names what a file that is not a regular one is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}

// Parse parses a pool file's content; source names it in errors. Every
// problem found is returned in one *ConfigError, sorted by line. Any other
// error (the embedded schema failing to compile) is a bug, not the file's.
func Parse(source string, data []byte) (*Config, error) {
	fail := func(ps []Problem) error { return &ConfigError{Source: source, Problems: sortProblems(ps)} }

	doc, p := parseYAML(data)
	if p != nil {
		return nil, fail([]Problem{*p})
	}
	if p := notAPoolFile(doc); p != nil {
		return nil, fail([]Problem{*p})
	}
	if p := checkAliases(doc); p != nil {
		return nil, fail([]Problem{*p})
	}
	t := newTree(doc)
	problems := t.problems

	sp, err := validateSchema(t)
	if err != nil {
		return nil, err
	}
	problems = append(problems, sp...)
	// A field the schema already complained about is not judged again.
	judged := map[string]bool{}
	for _, p := range sp {
		judged[p.Path] = true
	}
	c := check(t)
	for _, p := range c.problems {
		if !judged[p.Path] {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, fail(problems)
	}

	cfg, problems := decode(source, t, c.podSpecs)
	if len(problems) > 0 {
		return nil, fail(problems)
	}
	// The Config keeps only the lines of the fields a reconcile reports
	// at (filelines.go).
	return cfg, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
var unknownAnchor = regexp.MustCompile(`unknown anchor '(.*)' referenced`)

// parseYAML reads the single YAML document of data into a node tree.
func parseYAML(data []byte) (*yaml.Node, *Problem) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &yaml.Node{Kind: yaml.DocumentNode, Line: 1}, nil
		}
		return nil, syntaxProblem(data, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxProblem(data, err)
	default:
		return nil, &Problem{Line: extra.Line, Msg: "a pool file holds one YAML document; found a second one"}
	}
	return &doc, nil
}

// parserProblems are the messages of yaml's parser (as opposed to its
// scanner). The parser reports the 0-based line of the construct it was
// in, the scanner a 1-based one; both leave the line out when it is the
// first.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

func syntaxProblem(data []byte, err error) *Problem {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if parserProblems[m[2]] {
			line++
		}
		return &Problem{Line: line, Msg: "YAML syntax: " + m[2]}
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 1
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		line = 0
		for i, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, "*"+m[1]) {
				line = i + 1
				break
			}
		}
		// The name is the file's content, and a file that does not parse
		// may be anything (a token): the line says where.
		msg = "an alias refers to an unknown anchor"
	}
	return &Problem{Line: line, Msg: "YAML syntax: " + msg}
}

// decode turns a checked tree into the Config, applying the defaults. A
// failure here means the schema and the event types disagree; it is still
// reported against the file.
func decode(source string, t *tree, podSpecs map[string]json.RawMessage) (*Config, []Problem) {
	cfg := &Config{Source: source}
	root, _ := t.root.(map[string]any)
	groups, _ := root["groups"].([]any)
	slots, _ := root["slots"].([]any)
	var problems []Problem

	for i, g := range groups {
		ptr := pointer("groups", strconv.Itoa(i))
		m := copyMap(g.(map[string]any))
		name := m["name"].(string)
		delete(m, "name")
		delete(m, "power") // the template of its slots' power blocks
		if _, ok := m["scaler"]; !ok {
			m["scaler"] = events.ScalerClusterAutoscaler
		}
		if _, ok := m["readinessTaints"]; !ok {
			m["readinessTaints"] = []events.Taint{projections.DefaultReadinessTaint}
		}
		if tm, ok := m["template"].(map[string]any); ok {
			tm = copyMap(tm)
			quantityStrings(tm, "capacity")
			quantityStrings(tm, "allocatable")
			m["template"] = tm
		}
		var spec events.GroupSpec
		if err := strictJSON(m, &spec); err != nil {
			problems = append(problems, Problem{Line: t.line(ptr), Path: t.path(ptr), Msg: err.Error()})
			continue
		}
		if spec.ReadinessTaints == nil {
			spec.ReadinessTaints = []events.Taint{}
		}
		cfg.Groups = append(cfg.Groups, Group{Name: name, Spec: spec, Line: t.line(ptr), lines: entryLinesOf(t, "groups", i, groupFieldsReported)})
	}

	gp := groupPowers(groups)
	// The parsed file is held until it is applied; its slots share their
	// labels and capacity maps as the views do.
	shared := events.SpecMaps{}
	for i, s := range slots {
		ptr := pointer("slots", strconv.Itoa(i))
		sm := s.(map[string]any)
		m := copyMap(sm)
		name, group := m["name"].(string), m["group"].(string)
		delete(m, "name")
		delete(m, "group")
		delete(m, "power")
		if _, ok := m["providerID"]; !ok {
			m["providerID"] = DefaultProviderID(name)
		}
		quantityStrings(m, "capacity")
		for _, job := range []string{"startup", "shutdown"} {
			jm, ok := m[job].(map[string]any)
			if !ok {
				continue
			}
			jm = copyMap(jm)
			jm["podSpec"] = podSpecs[ptr+"/"+job+"/podSpec"]
			m[job] = jm
		}
		var spec events.SlotSpec
		if err := strictJSON(m, &spec); err != nil {
			problems = append(problems, Problem{Line: t.line(ptr), Path: t.path(ptr), Msg: err.Error()})
			continue
		}
		if b := powerOf(sm, ptr, gp); b != nil {
			if err := powerJobs(b, &spec); err != nil {
				problems = append(problems, Problem{Line: t.line(b.ptr), Path: t.path(b.ptr), Msg: err.Error()})
				continue
			}
		}
		shared.Share(&spec)
		cfg.Slots = append(cfg.Slots, Slot{Name: name, Group: group, Spec: spec, Line: t.line(ptr), lines: entryLinesOf(t, "slots", i, slotFieldsReported)})
	}
	return cfg, problems
}

func strictJSON(v any, into any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("cannot decode: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// quantityStrings rewrites the quantity map m[key], if any, with its
// numbers as strings: the specs keep quantities as text.
func quantityStrings(m map[string]any, key string) {
	q, ok := m[key].(map[string]any)
	if !ok {
		return
	}
	out := make(map[string]any, len(q))
	for k, v := range q {
		out[k], _ = quantityText(v)
	}
	m[key] = out
}
