package telemetry

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/claimstream/claimstream/internal/buildinfo"
)

// The spans' resource carries the build's version (the one
// claimstream_build_info reports), the pod's Kubernetes attributes, and
// whatever OTEL_RESOURCE_ATTRIBUTES says, which wins.
func TestTraceResourceHasVersionAndKubernetesAttributes(t *testing.T) {
	t.Setenv("POD_NAME", "claimstream-0")
	t.Setenv("POD_NAMESPACE", "claimstream")
	t.Setenv("NODE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "k8s.cluster.name=lab,k8s.namespace.name=from-env")
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Options{SpanExporter: exp, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Build: buildinfo.Info{Version: "v1.2.3", Revision: "r", GoVersion: "go"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	_, span := tel.Tracer.Start(context.Background(), "x")
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	got := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range map[string]string{
		"service.name": "claimstream", "service.version": "v1.2.3",
		"k8s.pod.name": "claimstream-0", "k8s.namespace.name": "from-env", "k8s.cluster.name": "lab",
	} {
		if got[k] != v {
			t.Errorf("resource %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["k8s.node.name"]; ok {
		t.Error("an empty NODE_NAME made an attribute")
	}
}

// Without a version given, the traces carry the build's.
func TestServiceVersionDefaultsToTheBuild(t *testing.T) {
	b, v := buildOf(buildinfo.Info{}, "")
	if want := buildinfo.Get(); b != want || v != want.Version {
		t.Fatalf("buildOf = %+v, %q; want %+v", b, v, want)
	}
	if b, v := buildOf(buildinfo.Info{Version: "a", Revision: "r"}, "b"); b.Version != "b" || v != "b" {
		t.Fatalf("an explicit ServiceVersion: %+v, %q", b, v)
	}
}
