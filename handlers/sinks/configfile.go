package sinks

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a sinks file: its line, the field as the
// file names it (sinks[1].backoff.max), and what is wrong.
type Problem struct {
	Line  int
	Field string
	Msg   string
}

// ConfigError is every problem of a sinks file, in line order, one per
// line ("sinks.yaml:7: sinks[0].url: required: ..."), the way the pool
// file's are reported. A file with problems changes nothing.
type ConfigError struct {
	Source   string
	Problems []Problem
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Source)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
		if p.Field != "" {
			b.WriteString(p.Field + ": ")
		}
		b.WriteString(p.Msg)
	}
	return b.String()
}

// LoadConfig reads and validates a sinks file; a *ConfigError lists every
// problem with its line and field.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("sinks file: %w", err)
	}
	src := osSources
	src.dir = filepath.Dir(path)
	return parseConfig(path, b, src)
}

// ParseConfig decodes a sinks file strictly (an unknown field is a
// problem naming it), reads the header values named by valueFrom (a
// relative file from the working directory), fills the defaults and
// validates every sink. A *ConfigError lists every problem.
func ParseConfig(b []byte) (Config, error) { return parseConfig("sinks file", b, osSources) }

// sinkFields are a sink's fields as the file names them, with what each
// holds (for the messages).
var sinkFields = map[string]string{
	"name": "a string", "url": "a string", "types": "a list of event types", "slots": "a list of slot names",
	"groups": "a list of group names", "mode": "binary or structured", "headers": "a map of header names to values (a string, or {valueFrom: {env: NAME}})",
	"maxAttempts": "a whole number", "backoff": "a map with initial and max", "timeout": "a duration such as 10s",
	"deadLetter": "true or false", "start": "new or all",
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func parseConfig(source string, b []byte, src secretSources) (Config, error) {
	var cfg Config
	var ps []Problem
	add := func(line int, field, format string, args ...any) {
		ps = append(ps, Problem{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		line := 0
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", line))
		add(line, "", "not YAML: %s", msg)
		return Config{}, &ConfigError{Source: source, Problems: ps}
	}
	if len(doc.Content) == 0 {
		return cfg, nil // an empty file: no sinks
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		add(root.Line, "", "want a map with a sinks list, got %s", kindOf(root))
		return Config{}, &ConfigError{Source: source, Problems: ps}
	}
	names := map[string]string{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "sinks" {
			add(k.Line, k.Value, "unknown field (the file has one: sinks)")
			continue
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		if v.Kind != yaml.SequenceNode {
			add(v.Line, "sinks", "want a list of sinks, got %s", kindOf(v))
			continue
		}
		for j, item := range v.Content {
			path := fmt.Sprintf("sinks[%d]", j)
			s, lines, itemPs := decodeSink(path, item, src)
			ps = append(ps, itemPs...)
			line := func(field string) int {
				for f := field; f != ""; {
					if l, ok := lines[f]; ok {
						return l
					}
					cut := strings.LastIndexAny(f, ".[")
					if cut < 0 {
						break
					}
					f = f[:cut]
				}
				return item.Line
			}
			for _, fp := range s.validate() {
				if _, typeProblem := lines["!"+fp.field]; typeProblem {
					continue // already reported as the wrong kind of value
				}
				add(line(fp.field), path+"."+fp.field, "%s", fp.msg)
			}
			if s.Name != "" {
				if other, dup := names[s.Name]; dup {
					add(line("name"), path+".name", "%q is also the name of %s", s.Name, other)
				} else {
					names[s.Name] = path
				}
			}
			cfg.Sinks = append(cfg.Sinks, s)
		}
	}
	if len(ps) > 0 {
		slices.SortStableFunc(ps, func(a, b Problem) int { return a.Line - b.Line })
		return Config{}, &ConfigError{Source: source, Problems: ps}
	}
	return cfg, nil
}

// decodeSink reads one sink's map field by field, so that every field of
// the wrong kind is reported (by its name in the file, with what it should
// hold), not only the first. lines maps a field (types[1], backoff.max) to
// its line; "!field" marks a field already reported.
func decodeSink(path string, n *yaml.Node, src secretSources) (Sink, map[string]int, []Problem) {
	var s Sink
	lines := map[string]int{}
	var ps []Problem
	bad := func(node *yaml.Node, field, want string) {
		lines["!"+field] = node.Line
		ps = append(ps, Problem{Line: node.Line, Field: path + "." + field, Msg: fmt.Sprintf("want %s, got %s", want, describe(node))})
	}
	if n.Kind != yaml.MappingNode {
		ps = append(ps, Problem{Line: n.Line, Field: path, Msg: "want a map of a sink's fields (name, url, ...), got " + kindOf(n)})
		return s, lines, ps
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := k.Value
		if _, known := sinkFields[field]; !known {
			ps = append(ps, Problem{Line: k.Line, Field: path + "." + field, Msg: "unknown field (a sink has " + strings.Join(slices.Sorted(maps.Keys(sinkFields)), ", ") + ")"})
			continue
		}
		if seen[field] {
			ps = append(ps, Problem{Line: k.Line, Field: path + "." + field, Msg: "given twice"})
			continue
		}
		seen[field] = true
		lines[field] = v.Line
		switch field {
		case "name", "url", "mode", "start":
			var str string
			if v.Kind != yaml.ScalarNode || v.Decode(&str) != nil {
				bad(v, field, sinkFields[field])
				continue
			}
			switch field {
			case "name":
				s.Name = str
			case "url":
				s.URL = str
			case "mode":
				s.Mode = Mode(str)
			case "start":
				s.Start = Start(str)
			}
		case "types", "slots", "groups":
			list, ok := stringList(v, field, lines)
			if !ok {
				bad(v, field, sinkFields[field])
				continue
			}
			switch field {
			case "types":
				s.Types = list
			case "slots":
				s.Slots = list
			case "groups":
				s.Groups = list
			}
		case "headers":
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				continue
			}
			if v.Kind != yaml.MappingNode {
				bad(v, field, sinkFields[field])
				continue
			}
			h, from, hps := decodeHeaders(path, v, src, lines)
			ps = append(ps, hps...)
			s.Headers, s.headerFrom = h, from
		case "maxAttempts":
			var x int
			if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&x) != nil {
				bad(v, field, sinkFields[field])
				continue
			}
			s.MaxAttempts = x
		case "timeout":
			d, ok := duration(v)
			if !ok {
				bad(v, field, sinkFields[field])
				continue
			}
			s.Timeout = d
		case "deadLetter":
			var x bool
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&x) != nil {
				bad(v, field, sinkFields[field])
				continue
			}
			s.DeadLetter = &x
		case "backoff":
			if v.Kind != yaml.MappingNode {
				bad(v, field, sinkFields[field])
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				bk, bv := v.Content[j], v.Content[j+1]
				sub := "backoff." + bk.Value
				if bk.Value != "initial" && bk.Value != "max" {
					ps = append(ps, Problem{Line: bk.Line, Field: path + "." + sub, Msg: "unknown field (backoff has initial and max)"})
					continue
				}
				lines[sub] = bv.Line
				d, ok := duration(bv)
				if !ok {
					bad(bv, sub, "a duration such as 1s")
					continue
				}
				if bk.Value == "initial" {
					s.Backoff.Initial = d
				} else {
					s.Backoff.Max = d
				}
			}
		}
	}
	return s, lines, ps
}

// stringList reads a list of strings, noting each element's line.
func stringList(v *yaml.Node, field string, lines map[string]int) ([]string, bool) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil, true
	}
	if v.Kind != yaml.SequenceNode {
		return nil, false
	}
	out := make([]string, 0, len(v.Content))
	for i, e := range v.Content {
		if e.Kind != yaml.ScalarNode {
			return nil, false
		}
		lines[fmt.Sprintf("%s[%d]", field, i)] = e.Line
		out = append(out, e.Value)
	}
	return out, true
}

// duration reads "10s", "1m30s" (a bare 0 is zero).
func duration(v *yaml.Node) (time.Duration, bool) {
	if v.Kind != yaml.ScalarNode {
		return 0, false
	}
	if v.Value == "0" {
		return 0, true
	}
	d, err := time.ParseDuration(v.Value)
	return d, err == nil
}

func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a value"
}

// describe is a node as the message shows it: the value, or its kind.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return kindOf(n)
}
