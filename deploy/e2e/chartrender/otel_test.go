package chartrender

import (
	"strings"
	"testing"
)

// OTEL_RESOURCE_ATTRIBUTES names the pod, namespace and node (downward
// API) and the version (the image tag). Kubernetes expands $(VAR) only
// from variables defined before it, so those must come first.
func TestOTELResourceAttributes(t *testing.T) {
	for _, c := range []struct{ doc, version string }{
		{"", "0.1.0"},
		{"image: {tag: 1.2.3}", "1.2.3"},
		{"image: {tag: 2.5}", "2.5"}, // --set image.tag=2.5 is a number
	} {
		srv := server(t, mustRender(t, c.doc))
		defined := map[string]string{}
		var attrs string
		for _, e := range srv["env"].([]any) {
			e := e.(map[string]any)
			name := e["name"].(string)
			if name == "OTEL_RESOURCE_ATTRIBUTES" {
				attrs = e["value"].(string)
				break
			}
			if vf, ok := e["valueFrom"].(map[string]any); ok {
				if fr, ok := vf["fieldRef"].(map[string]any); ok {
					defined[name] = fr["fieldPath"].(string)
				}
			}
		}
		if attrs == "" {
			t.Fatalf("%s: no OTEL_RESOURCE_ATTRIBUTES in %v", c.doc, srv["env"])
		}
		got := map[string]string{}
		for _, kv := range strings.Split(attrs, ",") {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
		for attr, field := range map[string]string{
			"k8s.pod.name": "metadata.name", "k8s.namespace.name": "metadata.namespace", "k8s.node.name": "spec.nodeName",
		} {
			v := got[attr]
			if !strings.HasPrefix(v, "$(") || !strings.HasSuffix(v, ")") {
				t.Errorf("%s: %s = %q, want $(VAR)", c.doc, attr, v)
				continue
			}
			if f := defined[strings.TrimSuffix(strings.TrimPrefix(v, "$("), ")")]; f != field {
				t.Errorf("%s: %s = %s, defined before it from %q, want fieldRef %s", c.doc, attr, v, f, field)
			}
		}
		if got["service.version"] != c.version {
			t.Errorf("%s: service.version = %q, want %s", c.doc, got["service.version"], c.version)
		}
		if img := srv["image"].(string); !strings.HasSuffix(img, ":"+c.version) {
			t.Errorf("%s: image %s is not version %s", c.doc, img, c.version)
		}
	}
}
