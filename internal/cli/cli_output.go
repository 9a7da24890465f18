package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/util/jsonpath"
)

// The output of the views verbs (get, replay), as kubectl's: table, wide,
// json, yaml, name (kind/name per line) and jsonpath=TEMPLATE, with
// --no-headers for the tables.

// viewsOutput is a parsed -o of get or replay.
type viewsOutput struct {
	format    string // table, wide, json, yaml, name, jsonpath
	jsonpath  *jsonpath.JSONPath
	noHeaders bool
}

const viewsFormats = "table, wide, json, yaml, name or jsonpath=TEMPLATE"

// parseViewsOutput reads -o: jsonpath=TEMPLATE takes kubectl's templates
// ({.items[*].name}); a template without braces is wrapped in them.
func parseViewsOutput(o string, noHeaders bool) (viewsOutput, error) {
	out := viewsOutput{noHeaders: noHeaders}
	switch {
	case o == "" || o == "table":
		out.format = "table"
	case o == "wide" || o == "json" || o == "yaml" || o == "name":
		out.format = o
	case strings.HasPrefix(o, "jsonpath="):
		tmpl := strings.TrimPrefix(o, "jsonpath=")
		if len(tmpl) >= 2 && (tmpl[0] == '\'' || tmpl[0] == '"') && tmpl[len(tmpl)-1] == tmpl[0] {
			tmpl = tmpl[1 : len(tmpl)-1]
		}
		if strings.TrimSpace(tmpl) == "" {
			return out, fmt.Errorf("-o jsonpath=: the template is empty (e.g. -o jsonpath='{.items[*].name}')")
		}
		if !strings.Contains(tmpl, "{") {
			if !strings.HasPrefix(tmpl, ".") {
				tmpl = "." + tmpl
			}
			tmpl = "{" + tmpl + "}"
		}
		jp := jsonpath.New("output")
		if err := jp.Parse(tmpl); err != nil {
			return out, fmt.Errorf("-o jsonpath=%s: %w", tmpl, err)
		}
		out.format, out.jsonpath = "jsonpath", jp
	default:
		return out, fmt.Errorf("-o %s: want %s", o, viewsFormats)
	}
	return out, nil
}

// printNames writes kind/name per line, as kubectl -o name.
func printNames(w io.Writer, kind string, v views) error {
	singular := strings.TrimSuffix(kind, "s")
	var names []string
	switch kind {
	case "groups":
		for _, g := range v.Groups {
			names = append(names, g.Name)
		}
	case "slots":
		for _, s := range v.Slots {
			names = append(names, s.Name)
		}
	default:
		for _, c := range v.Claims {
			names = append(names, c.Name)
		}
	}
	for _, n := range names {
		if _, err := fmt.Fprintf(w, "%s/%s\n", singular, n); err != nil {
			return err
		}
	}
	return nil
}

// printJSONPath runs the template over the object -o json would print.
func printJSONPath(w io.Writer, jp *jsonpath.JSONPath, obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var data any
	if err := json.Unmarshal(b, &data); err != nil {
		return err
	}
	// As kubectl: the template's output only, no newline added.
	if err := jp.Execute(w, data); err != nil {
		return fmt.Errorf("-o jsonpath: %w", err)
	}
	return nil
}
