package telemetry

import (
	"log/slog"
	"net/http"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/claimstream/claimstream/internal/buildinfo"
)

// buildOf settles the build the telemetry reports: one version for
// claimstream_build_info and the traces' service.version.
func buildOf(b buildinfo.Info, serviceVersion string) (buildinfo.Info, string) {
	if b.Version == "" {
		b = buildinfo.Get()
	}
	if serviceVersion != "" {
		b.Version = serviceVersion
	}
	return b, b.Version
}

// k8sAttributes are the Kubernetes resource attributes of the pod serve
// runs in, from the downward API variables the chart sets (POD_NAME,
// POD_NAMESPACE, NODE_NAME); outside a pod there are none.
// OTEL_RESOURCE_ATTRIBUTES still overrides them.
func k8sAttributes(getenv func(string) string) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, a := range []struct{ env, key string }{
		{"POD_NAME", "k8s.pod.name"},
		{"POD_NAMESPACE", "k8s.namespace.name"},
		{"NODE_NAME", "k8s.node.name"},
	} {
		if v := getenv(a.env); v != "" {
			out = append(out, attribute.String(a.key, v))
		}
	}
	return out
}

// scrapeHandler serves the registry with the zeros of atzero.go, in the
// OpenMetrics format when the scraper asks for it (Accept), else the
// Prometheus text format.
func scrapeHandler(reg promclient.Gatherer, m *Metrics, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(zeroFilled{Gatherer: reg, m: m}, promhttp.HandlerOpts{ErrorLog: promLogger{log}, EnableOpenMetrics: true})
}
