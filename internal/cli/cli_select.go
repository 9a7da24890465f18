package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/jsonpath"

	"github.com/claimstream/claimstream/provider/rest"
)

// The list filters of get: --group, --slot, --phase (the API's) and
// -l/--selector over the slots' labels (the CLI's), and --sort-by.

// listFilter is what a listing keeps.
type listFilter struct {
	group, slot, phase string
	// selector matches a slot's spec labels; a claim is kept when its
	// slot is. Nil keeps everything.
	selector labels.Selector
}

// parseSelector reads -l as kubectl does (env=prod,tier in (a,b),!gpu).
func parseSelector(kind, s string, named bool) (labels.Selector, error) {
	if s == "" {
		return nil, nil
	}
	if kind == "groups" {
		return nil, fmt.Errorf("-l %s: groups carry no labels; the selector matches slots' labels (get slots -l, or get claims -l for their claims)", s)
	}
	if named {
		return nil, fmt.Errorf("-l %s: a selector lists; it cannot be given with names", s)
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("-l %s: %w", s, err)
	}
	return sel, nil
}

// selectViews drops the slots, and the claims of the slots, the selector
// does not match.
func selectViews(ctx context.Context, c *rest.Client, kind string, f listFilter, v *views) error {
	if f.selector == nil {
		return nil
	}
	match := func(s rest.Slot) bool { return f.selector.Matches(labels.Set(s.Spec.Labels)) }
	switch kind {
	case "slots":
		v.Slots = slices.DeleteFunc(v.Slots, func(s rest.Slot) bool { return !match(s) })
	case "claims":
		slots, err := c.Slots(ctx, f.group)
		if err != nil {
			return err
		}
		keep := map[string]bool{}
		for _, s := range slots.Items {
			keep[s.Name] = match(s)
		}
		v.Claims = slices.DeleteFunc(v.Claims, func(cl rest.Claim) bool { return !keep[cl.Slot] })
	}
	return nil
}

// sortKey is a parsed --sort-by: a JSONPath over each item, as kubectl's
// ({.spec.providerID} or .spec.providerID).
type sortKey struct {
	expr string
	jp   *jsonpath.JSONPath
}

func parseSortBy(s string) (*sortKey, error) {
	if s == "" {
		return nil, nil
	}
	tmpl := s
	if !strings.Contains(tmpl, "{") {
		if !strings.HasPrefix(tmpl, ".") {
			tmpl = "." + tmpl
		}
		tmpl = "{" + tmpl + "}"
	}
	jp := jsonpath.New("sort-by").AllowMissingKeys(true)
	if err := jp.Parse(tmpl); err != nil {
		return nil, fmt.Errorf("--sort-by %s: %w (want a JSONPath over one item, e.g. --sort-by '{.requestedAt}')", s, err)
	}
	return &sortKey{expr: s, jp: jp}, nil
}

// sortViews orders the items of kind by the key; equal keys keep the
// server's order.
func sortViews(k *sortKey, kind string, v *views) error {
	if k == nil {
		return nil
	}
	switch kind {
	case "groups":
		return sortItems(k, v.Groups)
	case "slots":
		return sortItems(k, v.Slots)
	default:
		return sortItems(k, v.Claims)
	}
}

func sortItems[T any](k *sortKey, items []T) error {
	keys := make([]any, len(items))
	for i, it := range items {
		val, err := k.value(it)
		if err != nil {
			return err
		}
		keys[i] = val
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var bad error
	slices.SortStableFunc(idx, func(a, b int) int {
		n, err := compareKeys(keys[a], keys[b])
		if err != nil && bad == nil {
			bad = fmt.Errorf("--sort-by %s: %w", k.expr, err)
		}
		return n
	})
	if bad != nil {
		return bad
	}
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

// value is the key of one item as JSON decodes it (string, float64, bool),
// or nil when the item has no such field (it sorts first, as kubectl's).
func (k *sortKey) value(item any) (any, error) {
	b, err := json.Marshal(item)
	if err != nil {
		return nil, err
	}
	var data any
	if err := json.Unmarshal(b, &data); err != nil {
		return nil, err
	}
	res, err := k.jp.FindResults(data)
	if err != nil {
		return nil, fmt.Errorf("--sort-by %s: %w", k.expr, err)
	}
	if len(res) == 0 || len(res[0]) == 0 {
		return nil, nil
	}
	if len(res) > 1 || len(res[0]) > 1 {
		return nil, fmt.Errorf("--sort-by %s: the path gives several values for one item; want one field", k.expr)
	}
	v := res[0][0]
	if !v.IsValid() {
		return nil, nil
	}
	if v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if !v.IsValid() {
		return nil, nil
	}
	switch x := v.Interface().(type) {
	case nil:
		return nil, nil
	case string, float64, bool:
		return x, nil
	default:
		return nil, fmt.Errorf("--sort-by %s: the field is a %s, not a string, number or bool; point the path at one of its fields", k.expr, kindName(v))
	}
}

func kindName(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Map:
		return "map"
	case reflect.Slice, reflect.Array:
		return "list"
	}
	return v.Kind().String()
}

// compareKeys orders nil first, then by value; keys of different types
// cannot be ordered.
func compareKeys(a, b any) (int, error) {
	switch {
	case a == nil && b == nil:
		return 0, nil
	case a == nil:
		return -1, nil
	case b == nil:
		return 1, nil
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return cmp.Compare(x, y), nil
		}
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y), nil
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0, nil
			case !x:
				return -1, nil
			}
			return 1, nil
		}
	}
	return 0, fmt.Errorf("the items' values are of different types (%T and %T)", a, b)
}
