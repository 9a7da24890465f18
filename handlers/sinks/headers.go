package sinks

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A header's value in the sinks file is sent exactly as written:
//
//	headers:
//	  X-Team: payments               # as written, $ and all
//	  X-Literal: {value: "a $TOKEN"} # as written, spelled out
//	  Authorization:                 # a secret, read once at load
//	    prefix: "Bearer "
//	    valueFrom: {env: CLAIMSTREAM_ALERTS_TOKEN} # or {file: /run/secrets/alerts}
//
// Nothing is expanded: a secret comes only from a variable or a file the
// header names. A plain value that looks like a variable ($TOKEN, ${TOKEN})
// is refused, so a file written for expansion fails at load instead of
// sending the name.

// maxSecretFile bounds a header file (a token, not a document).
const maxSecretFile = 64 << 10

// secretSources is where valueFrom reads: the environment and files
// (relative paths from dir, the sinks file's directory). Tests and the
// fuzz target give their own.
type secretSources struct {
	dir       string
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error)
}

var osSources = secretSources{lookupEnv: os.LookupEnv, readFile: readSecretFile}

// readSecretFile reads a regular file of at most maxSecretFile bytes: a
// FIFO or a device (/dev/zero) is refused before it is opened.
func readSecretFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("%s is larger than %d KiB (a header value, not a document)", path, maxSecretFile>>10)
	}
	return b, nil
}

// envReference finds what os.ExpandEnv would have expanded in a plain
// value, as written in the conventional spelling of a variable: ${...},
// or $ followed by a capital letter or '_' ($TOKEN). abc$def is sent as is.
var envReference = regexp.MustCompile(`\$\{[^}]*\}?|\$[A-Z_][A-Za-z0-9_]*`)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// decodeHeaders reads a sink's headers map: each value a plain scalar, or
// a map with value, or valueFrom (env or file) and an optional prefix. It
// returns the values to send, keyed by the header name as written, and
// the source of each value read from outside (for messages).
func decodeHeaders(path string, v *yaml.Node, src secretSources, lines map[string]int) (map[string]string, map[string]string, []Problem) {
	var ps []Problem
	add := func(n *yaml.Node, field, format string, args ...any) {
		lines["!"+field] = n.Line
		ps = append(ps, Problem{Line: n.Line, Field: path + "." + field, Msg: fmt.Sprintf(format, args...)})
	}
	headers, from := map[string]string{}, map[string]string{}
	canonical := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			add(k, "headers", "a header name must be a string, got %s", kindOf(k))
			continue
		}
		name := k.Value
		field := "headers." + name
		lines[field] = val.Line
		if other, dup := canonical[http.CanonicalHeaderKey(name)]; dup {
			add(k, field, "given twice (header names are case-insensitive: %s)", other)
			continue
		}
		canonical[http.CanonicalHeaderKey(name)] = name
		switch val.Kind {
		case yaml.ScalarNode:
			if m := envReference.FindString(val.Value); m != "" {
				add(val, field, "refers to %s, but values are sent as written: for the variable's value write {valueFrom: {env: NAME}} (prefix: for text before it), for the text as it is write {value: ...}", m)
				continue
			}
			headers[name] = val.Value
		case yaml.MappingNode:
			value, source, ok := decodeHeaderValue(val, field, src, add)
			if !ok {
				continue
			}
			headers[name] = value
			if source != "" {
				from[name] = source
			}
		default:
			add(val, field, "want a string or a map with value or valueFrom, got %s", kindOf(val))
		}
	}
	return headers, from, ps
}

// decodeHeaderValue reads {value: ...} or {prefix: ..., valueFrom: {env:
// NAME} | {file: PATH}}. The value read is never put in a message.
func decodeHeaderValue(n *yaml.Node, field string, src secretSources, add func(*yaml.Node, string, string, ...any)) (string, string, bool) {
	var value, prefix, source string
	var hasValue, hasFrom, hasPrefix bool
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "value", "prefix":
			if v.Kind != yaml.ScalarNode {
				add(v, field+"."+k.Value, "want a string, got %s", kindOf(v))
				ok = false
				continue
			}
			if k.Value == "value" {
				value, hasValue = v.Value, true
			} else {
				prefix, hasPrefix = v.Value, true
			}
		case "valueFrom":
			hasFrom = true
			var got bool
			if value, source, got = readValueFrom(v, field+".valueFrom", src, add); !got {
				ok = false
			}
		default:
			add(k, field+"."+k.Value, "unknown field (a header's value is a string, or a map with value, or valueFrom and prefix)")
			ok = false
		}
	}
	switch {
	case !ok:
		return "", "", false
	case hasValue == hasFrom:
		add(n, field, "want exactly one of value and valueFrom")
		return "", "", false
	case hasPrefix && !hasFrom:
		add(n, field, "prefix goes with valueFrom (with value, write the whole value)")
		return "", "", false
	}
	return prefix + value, source, true
}

// readValueFrom reads {env: NAME} or {file: PATH}: a trailing newline of
// the file is dropped; an unset or empty variable, an empty file, is
// refused (an empty Authorization is never what was meant).
func readValueFrom(n *yaml.Node, field string, src secretSources, add func(*yaml.Node, string, string, ...any)) (string, string, bool) {
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 || n.Content[1].Kind != yaml.ScalarNode ||
		(n.Content[0].Value != "env" && n.Content[0].Value != "file") {
		add(n, field, "want {env: NAME} or {file: PATH}")
		return "", "", false
	}
	kind, v := n.Content[0].Value, n.Content[1]
	field += "." + kind
	if kind == "env" {
		if !envName.MatchString(v.Value) {
			add(v, field, "%q is not a variable name", v.Value)
			return "", "", false
		}
		val, set := src.lookupEnv(v.Value)
		switch {
		case !set:
			add(v, field, "environment variable %s is not set", v.Value)
			return "", "", false
		case val == "":
			add(v, field, "environment variable %s is empty", v.Value)
			return "", "", false
		}
		return val, "environment variable " + v.Value, true
	}
	p := v.Value
	if p == "" {
		add(v, field, "want a file's path")
		return "", "", false
	}
	if !filepath.IsAbs(p) && src.dir != "" {
		p = filepath.Join(src.dir, p)
	}
	b, err := src.readFile(p)
	if err != nil {
		add(v, field, "%v", err)
		return "", "", false
	}
	val := strings.TrimRight(string(b), "\r\n")
	if val == "" {
		add(v, field, "file %s is empty", p)
		return "", "", false
	}
	return val, "file " + p, true
}

// reservedHeaders are set by the request itself or by the CloudEvents
// binding from the event (with every Ce-* header): a sink's header must
// not override them.
var reservedHeaders = map[string]string{
	"Content-Type":      "the CloudEvents binding sets it",
	"Content-Length":    "the HTTP client sets it",
	"Transfer-Encoding": "the HTTP client sets it",
	"Host":              "the URL's host is sent",
	"Connection":        "hop-by-hop, the HTTP client sets it",
	"Keep-Alive":        "hop-by-hop, the HTTP client sets it",
	"Proxy-Connection":  "hop-by-hop, the HTTP client sets it",
	"Te":                "hop-by-hop, the HTTP client sets it",
	"Trailer":           "hop-by-hop, the HTTP client sets it",
	"Upgrade":           "hop-by-hop, the HTTP client sets it",
	"Traceparent":       "the event's own trace context is sent",
	"Tracestate":        "the event's own trace context is sent",
}

// headerProblem is what is wrong with a header (name as written, value to
// send, where the value came from), or "". The value is never shown.
func headerProblem(name, value, from string) string {
	if !validHeaderName(name) {
		return fmt.Sprintf("%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", name)
	}
	canonical := http.CanonicalHeaderKey(name)
	if strings.HasPrefix(canonical, "Ce-") {
		return "reserved: the CloudEvents binding sets the Ce-* headers from the event"
	}
	if why, ok := reservedHeaders[canonical]; ok {
		return "reserved: " + why
	}
	for _, c := range []byte(value) {
		if c < 0x20 && c != '\t' || c == 0x7f {
			where := ""
			if from != "" {
				where = " (read from " + from + ")"
			}
			return "the value" + where + " holds a CR, LF, NUL or another control character: a header value is one line"
		}
	}
	return ""
}

// validHeaderName: a non-empty RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
