package pool

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"

	"github.com/claimstream/claimstream/events"
)

// checker runs the semantic checks: what the schema cannot say (unique
// names, references, sizes against slot counts, quantities, pod specs).
// It reads the tree defensively: a value of the wrong type was already
// reported by the schema and is skipped here.
type checker struct {
	t        *tree
	problems []Problem
	// podSpecs holds the canonical JSON of every pod spec that checked
	// out, by the JSON pointer of its podSpec field.
	podSpecs map[string]json.RawMessage
}

func (c *checker) add(ptr, format string, args ...any) {
	c.problems = append(c.problems, Problem{Line: c.t.line(ptr), Path: c.t.path(ptr), Msg: fmt.Sprintf(format, args...)})
}

// Durations of a group, as JSON pointers relative to the group.
var groupDurations = []string{
	"/maxNodeProvisionTime", "/claimTTL",
	"/lifecycle/startupJobTimeout", "/lifecycle/registrationWait", "/lifecycle/readinessGate",
	"/autoscaling/scaleDownUnneededTime", "/autoscaling/scaleDownUnreadyTime",
	"/builtin/hold",
	"/drainTimeout",
}

func check(t *tree) *checker {
	c := &checker{t: t, podSpecs: map[string]json.RawMessage{}}
	root, _ := t.root.(map[string]any)
	groups, _ := root["groups"].([]any)
	slots, _ := root["slots"].([]any)

	// Groups: unique names.
	groupAt := map[string]string{} // name -> pointer of its entry
	for i, g := range groups {
		gm, _ := g.(map[string]any)
		ptr := pointer("groups", strconv.Itoa(i))
		name, ok := gm["name"].(string)
		if !ok {
			continue
		}
		if first, dup := groupAt[name]; dup {
			c.add(ptr+"/name", "duplicate group name %q (first declared at line %d)", name, t.line(first+"/name"))
			continue
		}
		groupAt[name] = ptr
	}

	// Slots: unique names and providerIDs, declared groups.
	slotAt := map[string]string{}
	providerAt := map[string]string{} // providerID -> pointer of the slot
	slotsOf := map[string]int{}
	for i, s := range slots {
		sm, _ := s.(map[string]any)
		ptr := pointer("slots", strconv.Itoa(i))
		name, nameOK := sm["name"].(string)
		if nameOK {
			if first, dup := slotAt[name]; dup {
				c.add(ptr+"/name", "duplicate slot name %q (first declared at line %d)", name, t.line(first+"/name"))
				nameOK = false // its default providerID would clash too; say it once
			} else {
				slotAt[name] = ptr
			}
		}
		if group, ok := sm["group"].(string); ok {
			if _, declared := groupAt[group]; !declared {
				c.add(ptr+"/group", "group %q is not declared", group)
			} else if nameOK {
				slotsOf[group]++
			}
		}
		pid, explicit := sm["providerID"].(string)
		if !explicit && nameOK {
			pid = events.DefaultProviderID(name)
		}
		if pid != "" && (explicit || nameOK) {
			if first, dup := providerAt[pid]; dup {
				other, _ := c.t.get(first + "/name")
				how := "providerID"
				if !explicit {
					how = "default providerID"
				}
				c.add(ptr+"/providerID", "%s %q is also used by slot %s (line %d)", how, pid, describe(other), providerLine(t, first))
			} else {
				providerAt[pid] = ptr
			}
		}
		c.labels(ptr+"/labels", sm["labels"])
		c.taints(ptr+"/taints", sm["taints"])
		c.quantities(ptr+"/capacity", sm["capacity"])
		for _, job := range []string{"startup", "shutdown"} {
			jm, _ := sm[job].(map[string]any)
			if ps, ok := jm["podSpec"].(map[string]any); ok {
				c.podSpec(ptr+"/"+job+"/podSpec", ps)
			}
		}
	}

	// Groups: sizes against slots, scaler settings, durations, template.
	for i, g := range groups {
		gm, ok := g.(map[string]any)
		if !ok {
			continue
		}
		ptr := pointer("groups", strconv.Itoa(i))
		name, _ := gm["name"].(string)
		n := slotsOf[name]
		minSize, minOK := integer(gm["minSize"])
		maxSize, maxOK := integer(gm["maxSize"])
		if maxOK && maxSize > 0 && maxSize > int64(n) {
			c.add(ptr+"/maxSize", "must be <= %d, the number of slots of group %q (got %d)", n, name, maxSize)
		}
		switch {
		case !minOK || minSize < 0:
		case maxOK && maxSize > 0 && minSize > maxSize:
			c.add(ptr+"/minSize", "must be <= maxSize %d (got %d)", maxSize, minSize)
		case minSize > int64(n):
			c.add(ptr+"/minSize", "must be <= %d, the number of slots of group %q (got %d)", n, name, minSize)
		}
		if scaler, _ := gm["scaler"].(string); scaler == events.ScalerBuiltin {
			b, _ := gm["builtin"].(map[string]any)
			if m, ok := integer(b["maxNodes"]); ok && m > int64(n) {
				c.add(ptr+"/builtin/maxNodes", "must be <= %d, the number of slots of group %q (got %d)", n, name, m)
			}
		}
		for _, rel := range groupDurations {
			v, ok := t.get(ptr + rel)
			s, isString := v.(string)
			if !ok || !isString {
				continue
			}
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				c.add(ptr+rel, "must be a Go duration such as \"90s\", \"5m\" or \"1h30m\" (got %q)", s)
			case d < 0:
				c.add(ptr+rel, "must not be negative (got %q)", s)
			case d == 0 && (strings.HasPrefix(rel, "/lifecycle/") || rel == "/drainTimeout"):
				c.add(ptr+rel, "must be > 0 (got %q); leave it out to take the default", s)
			}
		}
		c.taints(ptr+"/readinessTaints", gm["readinessTaints"])
		if tm, ok := gm["template"].(map[string]any); ok {
			c.labels(ptr+"/template/labels", tm["labels"])
			c.annotations(ptr+"/template/annotations", tm["annotations"])
			c.taints(ptr+"/template/taints", tm["taints"])
			c.quantities(ptr+"/template/capacity", tm["capacity"])
			c.quantities(ptr+"/template/allocatable", tm["allocatable"])
		}
	}
	c.costs(groups, slots, groupAt)
	c.powers(groups, slots)
	return c
}

func providerLine(t *tree, slotPtr string) int {
	if _, ok := t.get(slotPtr + "/providerID"); ok {
		return t.line(slotPtr + "/providerID")
	}
	return t.line(slotPtr)
}

func (c *checker) labels(ptr string, v any) {
	m, _ := v.(map[string]any)
	for _, k := range sortedKeys(m) {
		kptr := ptr + "/" + escapeToken(k)
		if errs := content.IsLabelKey(k); len(errs) > 0 {
			c.add(kptr, "invalid label key: %s", strings.Join(errs, "; "))
		}
		if s, ok := m[k].(string); ok {
			if errs := content.IsLabelValue(s); len(errs) > 0 {
				c.add(kptr, "invalid label value %q: %s", s, strings.Join(errs, "; "))
			}
		}
	}
}

// annotations checks keys as the API server does, and their total size
// (keys and values) against its limit, so a file that validates applies.
func (c *checker) annotations(ptr string, v any) {
	m, _ := v.(map[string]any)
	total := 0
	for _, k := range sortedKeys(m) {
		if errs := content.IsLabelKey(k); len(errs) > 0 {
			c.add(ptr+"/"+escapeToken(k), "invalid annotation key: %s", strings.Join(errs, "; "))
		}
		total += len(k)
		if s, ok := m[k].(string); ok {
			total += len(s)
		}
	}
	if total > apivalidation.TotalAnnotationSizeLimitB {
		c.add(ptr, "annotations of %d bytes (keys and values): the API server's limit is %d (256 KiB)", total, apivalidation.TotalAnnotationSizeLimitB)
	}
}

func (c *checker) taints(ptr string, v any) {
	l, _ := v.([]any)
	seen := map[string]string{}
	for i, x := range l {
		m, ok := x.(map[string]any)
		if !ok {
			continue
		}
		tptr := ptr + "/" + strconv.Itoa(i)
		key, _ := m["key"].(string)
		effect, _ := m["effect"].(string)
		if key != "" {
			if errs := content.IsLabelKey(key); len(errs) > 0 {
				c.add(tptr+"/key", "invalid taint key: %s", strings.Join(errs, "; "))
			}
		}
		if s, ok := m["value"].(string); ok {
			if errs := content.IsLabelValue(s); len(errs) > 0 {
				c.add(tptr+"/value", "invalid taint value %q: %s", s, strings.Join(errs, "; "))
			}
		}
		if key == "" || effect == "" {
			continue
		}
		id := key + ":" + effect
		if first, dup := seen[id]; dup {
			c.add(tptr, "duplicate taint %s (first at line %d)", id, c.t.line(first))
			continue
		}
		seen[id] = tptr
	}
}

func (c *checker) quantities(ptr string, v any) {
	m, _ := v.(map[string]any)
	for _, k := range sortedKeys(m) {
		kptr := ptr + "/" + escapeToken(k)
		if errs := content.IsLabelKey(k); len(errs) > 0 {
			c.add(kptr, "invalid resource name: %s", strings.Join(errs, "; "))
		}
		s, ok := quantityText(m[k])
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			c.add(kptr, "must be a Kubernetes quantity such as \"8\", \"500m\" or \"32Gi\" (got %s)", describe(m[k]))
			continue
		}
		if q.Sign() < 0 {
			c.add(kptr, "must not be negative (got %s)", describe(m[k]))
		}
	}
}

// quantityText is a quantity as the text a Quantity parses: a string as
// written, a number as its literal.
func quantityText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	}
	return "", false
}

func integer(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	return i, err == nil
}
