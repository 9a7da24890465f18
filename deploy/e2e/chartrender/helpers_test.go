package chartrender

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// values parses a YAML values document.
func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("values %q: %v", doc, err)
	}
	return v
}

// mustRender renders release "claimstream" in namespace "ns".
func mustRender(t *testing.T, doc string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Render("claimstream", "ns", values(t, doc))
	if err != nil {
		t.Fatalf("render %q: %v", doc, err)
	}
	return objs
}

// find returns the object of kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func mustFind(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	o := find(objs, kind, name)
	if o == nil {
		t.Fatalf("no %s %s rendered", kind, name)
	}
	return o
}

func count(objs []*unstructured.Unstructured, kind string) int {
	n := 0
	for _, o := range objs {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

// server returns the StatefulSet's claimstream container.
func server(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	sts := mustFind(t, objs, "StatefulSet", "claimstream")
	cs, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if c.(map[string]any)["name"] == "claimstream" {
			return c.(map[string]any)
		}
	}
	t.Fatal("no claimstream container")
	return nil
}

// args returns serve's arguments as flag name -> value ("" for a bare flag).
func args(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range server(t, objs)["args"].([]any) {
		k, v, _ := strings.Cut(a.(string), "=")
		out[k] = v
	}
	return out
}

// str reads a nested string, failing when it is absent.
func str(t *testing.T, obj map[string]any, path ...string) string {
	t.Helper()
	s, ok, err := unstructured.NestedString(obj, path...)
	if err != nil || !ok {
		t.Fatalf("%s: no string (%v) in %v", strings.Join(path, "."), err, obj)
	}
	return s
}

// repoFile reads a file of the repository (the chart is deploy/chart).
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ChartDir(), "..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustErr(t *testing.T, doc, want string) {
	t.Helper()
	_, err := Render("claimstream", "ns", values(t, doc))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("values %s: err = %v, want one mentioning %q", doc, err, want)
	}
}

func fmtKinds(objs []*unstructured.Unstructured) string {
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "%s/%s ", o.GetKind(), o.GetName())
	}
	return b.String()
}
