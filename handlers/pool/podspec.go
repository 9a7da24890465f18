package pool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// podSpec checks the pod spec at ptr the way the API server would read it
// (field names case-sensitive, no unknown fields, every value of the right
// type), so each mistake is reported at its own line. A spec without
// problems is decoded and stored as compact canonical JSON: the same file
// always gives byte-identical specs.
func (c *checker) podSpec(ptr string, v map[string]any) {
	before := len(c.problems)
	c.walk(reflect.TypeFor[corev1.PodSpec](), v, ptr)
	if len(c.problems) > before {
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		c.add(ptr, "%v", err)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var ps corev1.PodSpec
	if err := dec.Decode(&ps); err != nil {
		c.add(ptr, "not a Kubernetes PodSpec: %s", strings.TrimPrefix(err.Error(), "json: "))
		return
	}
	if len(ps.Containers) == 0 {
		c.add(ptr+"/containers", "at least one container is required")
	}
	for _, list := range []struct {
		key string
		cs  []corev1.Container
	}{{"containers", ps.Containers}, {"initContainers", ps.InitContainers}} {
		for i, ct := range list.cs {
			cptr := ptr + pointer(list.key, strconv.Itoa(i))
			if ct.Name == "" {
				c.add(cptr+"/name", "is required (the API server rejects a container without a name)")
			}
			if ct.Image == "" {
				c.add(cptr+"/image", "is required")
			}
		}
	}
	switch ps.RestartPolicy {
	case "", corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	default:
		c.add(ptr+"/restartPolicy", "must be \"Never\" or \"OnFailure\" for a Job's pod (got %q)", ps.RestartPolicy)
	}
	if len(c.problems) > before {
		return
	}
	canon, err := json.Marshal(&ps)
	if err != nil {
		c.add(ptr, "%v", err)
		return
	}
	if len(canon) > MaxPodSpecBytes {
		c.add(ptr, "a pod spec of %d bytes (as JSON): at most %d (256 KiB), so the slot's declaration fits one event of the log and its Job one API request", len(canon), MaxPodSpecBytes)
		return
	}
	c.podSpecs[ptr] = canon
}

// MaxPodSpecBytes bounds a lifecycle pod spec (compact JSON): a slot's
// two specs travel in one event of the log (at most 1 MiB, the NATS
// payload limit).
const MaxPodSpecBytes = 256 << 10

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// walk checks value v (from the tree) against Go type t as encoding/json
// would decode it, but case-sensitively and reporting every unknown field
// and wrong type at its own path instead of stopping at the first.
func (c *checker) walk(t reflect.Type, v any, ptr string) {
	if v == nil {
		return // null decodes to the zero value
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		// Quantity, IntOrString, Time: let the type judge its own form.
		raw, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(raw, reflect.New(t).Interface())
		}
		if err != nil {
			c.add(ptr, "%s (got %s)", strings.TrimPrefix(err.Error(), "json: "), describe(v))
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		c.walk(t.Elem(), v, ptr)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			c.add(ptr, "must be a mapping (got %s)", describe(v))
			return
		}
		fields := jsonFields(t)
		var names []string
		for k := range fields {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range sortedKeys(m) {
			kptr := ptr + "/" + escapeToken(k)
			ft, ok := fields[k]
			if !ok {
				msg := "unknown field"
				if s := suggest(k, names); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				c.add(kptr, "%s", msg)
				continue
			}
			c.walk(ft, m[k], kptr)
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			if _, ok := v.(string); !ok {
				c.add(ptr, "must be a base64 string (got %s)", describe(v))
			}
			return
		}
		l, ok := v.([]any)
		if !ok {
			c.add(ptr, "must be a list (got %s)", describe(v))
			return
		}
		for i, x := range l {
			c.walk(t.Elem(), x, ptr+"/"+strconv.Itoa(i))
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			c.add(ptr, "must be a mapping (got %s)", describe(v))
			return
		}
		for _, k := range sortedKeys(m) {
			c.walk(t.Elem(), m[k], ptr+"/"+escapeToken(k))
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			c.add(ptr, "must be a string (got %s)", describe(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			c.add(ptr, "must be true or false (got %s)", describe(v))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			c.add(ptr, "must be an integer (got %s)", describe(v))
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				c.add(ptr, "is out of range for a %d-bit integer (got %s)", t.Bits(), n)
			} else {
				c.add(ptr, "must be an integer (got %s)", n)
			}
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			c.add(ptr, "must be a non-negative integer (got %s)", describe(v))
			return
		}
		if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			c.add(ptr, "must be a non-negative integer of %d bits (got %s)", t.Bits(), n)
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			c.add(ptr, "must be a number (got %s)", describe(v))
		}
	case reflect.Interface:
		// anything goes
	}
}

// jsonFields maps the JSON names of a struct's fields to their types,
// promoting the fields of embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					add(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := out[name]; !dup {
				out[name] = f.Type
			}
		}
	}
	add(t)
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
