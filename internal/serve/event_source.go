package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	cetypes "github.com/cloudevents/sdk-go/v2/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// eventSourceHelp is the --event-source flag's help.
const eventSourceHelp = "CloudEvents source of the events this installation writes (default /claimstream/<kube-system namespace UID>/<namespace> in a cluster, /claimstream/<namespace> if that namespace cannot be read, /claimstream/<hostname> with the simulator)"

// eventSource is the CloudEvents source stamped on every event serve
// writes: --event-source, else one naming the installation, so that two
// clusters' events differ in a shared sink or archive.
func eventSource(o serveOptions) (string, error) {
	src := o.eventSource
	if src == "" {
		name := o.cluster.namespace
		if o.cluster.simulated() || name == "" {
			if h, err := os.Hostname(); err == nil && h != "" {
				name = h
			}
		}
		src = "/claimstream"
		if name != "" {
			src += "/" + name
		}
	}
	u := cetypes.ParseURIRef(src)
	if src == "" || strings.ContainsAny(src, " \t\r\n") || u == nil {
		return "", fmt.Errorf("--event-source %q: want a URI reference such as /claimstream/prod-eu (no spaces)", src)
	}
	// Events carry the source as the SDK writes it, and readers refuse one
	// in another form: what is stamped is exactly what was given.
	if w := u.String(); w != src {
		return "", fmt.Errorf("--event-source %q: events would carry it as %q; give it in that form", src, w)
	}
	return src, nil
}

// sourceLookupTimeout bounds the one read of the kube-system Namespace at
// start: a cluster that does not answer gets the namespace-only source.
const sourceLookupTimeout = 10 * time.Second

// eventSourceOf is the source serve stamps: the given --event-source, the
// simulator's default, or in a cluster the default naming the cluster (see
// clusterEventSource). It sets only the one field, so goroutines already
// reading the options do not race with it.
func eventSourceOf(ctx context.Context, o serveOptions, log *slog.Logger) string {
	if o.eventSource != "" || o.cluster.simulated() {
		return o.eventSource
	}
	cfg, err := restConfig(o.cluster.kubeconfig)
	if err == nil {
		var c *corev1client.CoreV1Client
		if c, err = corev1client.NewForConfig(cfg); err == nil {
			return clusterEventSource(ctx, o, c, log)
		}
	}
	log.Warn("the default CloudEvents source does not name the cluster: no Kubernetes client", "err", err, "source", mustEventSource(o))
	return o.eventSource
}

// clusterEventSource is /claimstream/<kube-system Namespace UID>/<namespace>:
// the UID is fixed for a cluster's life and differs between clusters, so
// two clusters with the same namespace write different sources. If the
// Namespace cannot be read (RBAC without the chart's rule, an API server
// that does not answer), it is "" and serve keeps the namespace-only
// default, said once in the log.
func clusterEventSource(ctx context.Context, o serveOptions, c corev1client.NamespacesGetter, log *slog.Logger) string {
	ctx, cancel := context.WithTimeout(ctx, sourceLookupTimeout)
	defer cancel()
	ns, err := c.Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err == nil && ns.UID == "" {
		err = errors.New("the namespace has no UID")
	}
	if err != nil {
		why := "the kube-system namespace could not be read"
		if apierrors.IsForbidden(err) {
			why = "serve may not get namespaces/kube-system (the chart's ClusterRole grants it when eventSource is empty)"
		}
		log.Warn("the default CloudEvents source does not name the cluster: "+why, "err", err, "source", mustEventSource(o))
		return ""
	}
	src := "/claimstream/" + string(ns.UID)
	if o.cluster.namespace != "" {
		src += "/" + o.cluster.namespace
	}
	return src
}

// mustEventSource is eventSource's default for a log line ("" if refused).
func mustEventSource(o serveOptions) string {
	s, _ := eventSource(o)
	return s
}
