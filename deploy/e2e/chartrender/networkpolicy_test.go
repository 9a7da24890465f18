package chartrender

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ingressByPort returns the NetworkPolicy's peers by port.
func ingressByPort(t *testing.T, doc string) map[string][]any {
	t.Helper()
	objs := mustRender(t, doc)
	np := mustFind(t, objs, "NetworkPolicy", "claimstream")
	sel, _, _ := unstructured.NestedStringMap(np.Object, "spec", "podSelector", "matchLabels")
	podLabels, _, _ := unstructured.NestedStringMap(mustFind(t, objs, "StatefulSet", "claimstream").Object, "spec", "template", "metadata", "labels")
	if !labelsMatch(sel, podLabels) {
		t.Errorf("the NetworkPolicy selects %v, not the claimstream Pods", sel)
	}
	out := map[string][]any{}
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	for _, r := range rules {
		r := r.(map[string]any)
		for _, p := range r["ports"].([]any) {
			port := fmt.Sprint(p.(map[string]any)["port"])
			out[port] = append(out[port], r["from"].([]any)...)
		}
	}
	return out
}

func TestNetworkPolicy(t *testing.T) {
	if find(mustRender(t, ""), "NetworkPolicy", "claimstream") != nil {
		t.Fatal("a NetworkPolicy by default")
	}
	server := map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
		"app.kubernetes.io/name": "claimstream", "app.kubernetes.io/instance": "claimstream", "app.kubernetes.io/component": "server",
	}}}
	monitoring := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}

	t.Run("the chart's cluster-autoscaler, 3 replicas", func(t *testing.T) {
		objs := mustRender(t, "{networkPolicy: {enabled: true}, clusterAutoscaler: {enabled: true}, replicas: 3}")
		caLabels, _, _ := unstructured.NestedStringMap(mustFind(t, objs, "Deployment", "claimstream-cluster-autoscaler").Object, "spec", "template", "metadata", "labels")
		got := ingressByPort(t, "{networkPolicy: {enabled: true}, clusterAutoscaler: {enabled: true}, replicas: 3}")
		if len(got["8086"]) != 1 {
			t.Fatalf("provider peers %v", got["8086"])
		}
		caSel, _, _ := unstructured.NestedStringMap(got["8086"][0].(map[string]any), "podSelector", "matchLabels")
		if !labelsMatch(caSel, caLabels) {
			t.Errorf("provider port admits %v, not the chart's cluster-autoscaler %v", caSel, caLabels)
		}
		if !reflect.DeepEqual(got["9464"], []any{monitoring}) {
			t.Errorf("metrics peers %v", got["9464"])
		}
		if !reflect.DeepEqual(got["6222"], []any{server}) {
			t.Errorf("routes peers %v, want the other replicas", got["6222"])
		}
		if _, ok := got["8087"]; ok {
			t.Errorf("API port open without a selector: %v", got["8087"])
		}
	})
	t.Run("given selectors, 1 replica", func(t *testing.T) {
		got := ingressByPort(t, `
networkPolicy:
  enabled: true
  clusterAutoscaler:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}
    podSelector: {matchLabels: {app: cluster-autoscaler}}
  monitoring:
    namespaceSelector: {matchLabels: {team: observability}}
  api:
    podSelector: {matchLabels: {claimstream.dev/cli: "true"}}
`)
		want := map[string][]any{
			"8086": {map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "kube-system"}},
				"podSelector":       map[string]any{"matchLabels": map[string]any{"app": "cluster-autoscaler"}},
			}},
			"9464": {map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "observability"}}}},
			"8087": {map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"claimstream.dev/cli": "true"}}}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ingress by port\n got %v\nwant %v", got, want)
		}
	})
	t.Run("no cluster-autoscaler known", func(t *testing.T) {
		if got := ingressByPort(t, "networkPolicy: {enabled: true}"); got["8086"] != nil {
			t.Errorf("provider port open to %v with no cluster-autoscaler selector", got["8086"])
		}
	})
}
