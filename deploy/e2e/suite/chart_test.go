package suite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/deploy/e2e/chartrender"
)

// cert-manager's and prometheus-operator's kinds as minimal CRDs (schema:
// preserve unknown fields), so that the cert-manager and monitoring
// renderings are accepted by the real API server. Their objects are checked
// for kind, apiVersion and metadata only (chartrender checks their content).
const certManagerCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: certificates.cert-manager.io}
spec:
  group: cert-manager.io
  names: {kind: Certificate, plural: certificates, singular: certificate, listKind: CertificateList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: issuers.cert-manager.io}
spec:
  group: cert-manager.io
  names: {kind: Issuer, plural: issuers, singular: issuer, listKind: IssuerList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: prometheusrules.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: PrometheusRule, plural: prometheusrules, singular: prometheusrule, listKind: PrometheusRuleList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

var chartCases = []struct {
	name   string
	values string
	// kinds that must be rendered (count by kind)
	want map[string]int
}{
	{
		name:   "defaults",
		values: ``,
		want:   map[string]int{"StatefulSet": 1, "Service": 4, "ConfigMap": 1, "Secret": 3, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 3, "RoleBinding": 3, "PodDisruptionBudget": 0, "NetworkPolicy": 0},
	},
	{
		name: "autoscaler-and-everything",
		values: `
replicas: 3
rbac: {builtinScaler: true}
jobNamespace: power-jobs
logLevel: debug
extraArgs: [--config-poll=30s]
persistence: {size: 10Gi, storageClassName: fast, fsync: false}
metrics: {enabled: true, port: 9100}
otlpEndpoint: http://otel-collector.observability.svc:4317
rest: {existingTokenSecret: claimstream-api-token}
tls: {clientAuth: true, extraDNSNames: [claimstream.example.org], validityDays: 30}
service: {type: NodePort, annotations: {example.org/x: "y"}}
podAnnotations: {example.org/scrape: "true"}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: CriticalAddonsOnly, operator: Exists}]
priorityClassName: system-cluster-critical
clusterAutoscaler:
  enabled: true
  maxNodeProvisionTime: 20m
  extraArgs: [--scan-interval=5s, --scale-down-unneeded-time=5m]
`,
		want: map[string]int{"StatefulSet": 1, "Service": 4, "Deployment": 1, "ConfigMap": 2, "Secret": 4, "ServiceAccount": 2, "ClusterRole": 2, "ClusterRoleBinding": 2, "Role": 4, "RoleBinding": 4, "PodDisruptionBudget": 1},
	},
	{
		name: "existing-secrets-no-leader-election",
		values: `
leaderElection: {enabled: false}
pool: {existingConfigMap: my-pool}
tls: {mode: existing, serverSecret: my-server-tls, clientSecret: my-client-tls, clientAuth: false}
rest: {enabled: false}
metrics: {enabled: false}
serviceAccount: {create: false, name: claimstream-sa}
clusterAutoscaler: {enabled: true}
`,
		want: map[string]int{"StatefulSet": 1, "Service": 2, "Deployment": 1, "ConfigMap": 1, "ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 2, "Role": 3, "RoleBinding": 3},
	},
	{
		name: "cert-manager",
		values: `
tls: {mode: cert-manager}
clusterAutoscaler: {enabled: true}
`,
		want: map[string]int{"Certificate": 3, "Issuer": 2, "StatefulSet": 1, "Deployment": 1},
	},
	{
		name: "cert-manager-own-issuer",
		values: `
tls: {mode: cert-manager, certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}}
`,
		want: map[string]int{"Certificate": 2, "Issuer": 0, "StatefulSet": 1},
	},
	{
		name: "three-replicas-cert-manager",
		values: `
replicas: 3
tls: {mode: cert-manager}
podAntiAffinity: required
`,
		want: map[string]int{"Certificate": 4, "Issuer": 2, "StatefulSet": 1, "PodDisruptionBudget": 1, "Secret": 2},
	},
	{
		name: "three-replicas-monitoring-networkpolicy",
		values: `
replicas: 3
rest: {tls: true}
clusterAutoscaler: {enabled: true}
metrics:
  serviceMonitor: {enabled: true, labels: {release: prom}}
  prometheusRule: {enabled: true}
  dashboard: {enabled: true}
networkPolicy:
  enabled: true
  api: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ops}}}
`,
		want: map[string]int{"StatefulSet": 1, "Service": 5, "Secret": 5, "ConfigMap": 3, "ServiceMonitor": 2, "PrometheusRule": 1, "NetworkPolicy": 1, "PodDisruptionBudget": 1, "Deployment": 1},
	},
}

// TestChartServerSideDryRun renders deploy/chart with default and
// non-default values (Helm's Go API, as `helm template`) and creates every
// rendered object on the real API server with a server-side dry run and
// strict field validation: every manifest is checked against the real
// schemas (and admission).
func TestChartServerSideDryRun(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	for _, doc := range strings.Split(certManagerCRDs, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if err := applyDynamic(ctx, &unstructured.Unstructured{Object: m}, false); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	waitT(t, 30*time.Second, "cert-manager and prometheus-operator stub CRDs served", func() (bool, string) {
		for _, gv := range []string{"cert-manager.io/v1", "monitoring.coreos.com/v1"} {
			if _, err := adminCfgDiscovery().ServerResourcesForGroupVersion(gv); err != nil {
				return false, fmt.Sprint(err)
			}
		}
		return true, ""
	})
	for i, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			var vals map[string]any
			if err := yaml.Unmarshal([]byte(c.values), &vals); err != nil {
				t.Fatal(err)
			}
			ns := fmt.Sprintf("chart-%d", i)
			objs, err := chartrender.Render("claimstream", ns, vals)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			for k, n := range c.want {
				if kinds[k] != n {
					t.Errorf("%d %s rendered, want %d (all: %v)", kinds[k], k, n, kinds)
				}
			}
			for _, n := range []string{ns, "power-jobs"} {
				if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
			for _, o := range objs {
				if o.GetNamespace() == "" && namespaced(o.GetKind()) {
					t.Errorf("%s %s has no namespace", o.GetKind(), o.GetName())
					o.SetNamespace(ns)
				}
				if err := applyDynamic(ctx, o, true); err != nil {
					t.Errorf("server-side dry run of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			t.Logf("%d objects validated: %v", len(objs), kinds)
			checkChartWiring(t, objs)
		})
	}
}

func namespaced(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "Namespace", "CustomResourceDefinition":
		return false
	}
	return true
}

// checkChartWiring checks what a dry run cannot: the server's arguments
// point at the mounted files, and cluster-autoscaler's cloud-config points
// at the gRPC Service with the client certificate.
func checkChartWiring(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var grpcSvc, cloudConfig string
	var args []any
	for _, o := range objs {
		switch {
		case o.GetKind() == "Service" && strings.HasSuffix(o.GetName(), "-grpc"):
			grpcSvc = o.GetName() + "." + o.GetNamespace() + ".svc"
		case o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-cloud-config"):
			cloudConfig, _, _ = unstructured.NestedString(o.Object, "data", "cloud-config.yaml")
		case o.GetKind() == "StatefulSet":
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ = unstructured.NestedSlice(cs[0].(map[string]any), "args")
		}
	}
	joined := fmt.Sprint(args)
	for _, want := range []string{"serve", "--config=/etc/claimstream/pool/pool.yaml", "--tls-cert=/etc/claimstream/tls/tls.crt"} {
		if !strings.Contains(joined, want) {
			t.Errorf("server args %v lack %s", args, want)
		}
	}
	if strings.Contains(joined, "--plaintext") {
		t.Errorf("the chart must not serve plaintext: %v", args)
	}
	if cloudConfig != "" {
		if !strings.Contains(cloudConfig, `address: "`+grpcSvc+`:8086"`) || !strings.Contains(cloudConfig, "cert: ") {
			t.Errorf("cloud-config does not point at %s with a client cert:\n%s", grpcSvc, cloudConfig)
		}
	}
}

// TestChartRBACForLeaderEventsStatus asks the real authorizer what the
// chart's ServiceAccount (its RBAC applied in setup) may do in the release
// namespace: the leader labels its own Pod, Kubernetes Events are written,
// and of the ConfigMaps only claimstream-status is read or written.
func TestChartRBACForLeaderEventsStatus(t *testing.T) {
	if serverUser == "e2e-admin" {
		t.Skip("CLAIMSTREAM_E2E_ADMIN set: the chart's RBAC is not applied")
	}
	ctx := ctxFor(t, 30*time.Second)
	for _, c := range []struct {
		ra      authorizationv1.ResourceAttributes
		allowed bool
	}{
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "patch", Namespace: namespace, Name: "e2e-claimstream-0"}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "get", Namespace: namespace}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "patch", Namespace: "default"}, false},
		{authorizationv1.ResourceAttributes{Group: "events.k8s.io", Resource: "events", Verb: "create", Namespace: namespace}, true},
		{authorizationv1.ResourceAttributes{Group: "events.k8s.io", Resource: "events", Verb: "patch", Namespace: namespace}, true},
		{authorizationv1.ResourceAttributes{Resource: "events", Verb: "create", Namespace: namespace}, true},
		{authorizationv1.ResourceAttributes{Resource: "events", Verb: "create", Namespace: "default"}, false},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "create", Namespace: namespace}, true},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "update", Namespace: namespace, Name: "claimstream-status"}, true},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "watch", Namespace: namespace, Name: "claimstream-status"}, true},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "get", Namespace: namespace, Name: "e2e-claimstream-pool"}, false},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "list", Namespace: namespace}, false},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "update", Namespace: "default", Name: "claimstream-status"}, false},
	} {
		ra := c.ra
		rv, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               serverUser,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &ra,
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rv.Status.Allowed != c.allowed {
			t.Errorf("%s %s/%s %q in %q: allowed=%v, want %v", ra.Verb, ra.Group, ra.Resource, ra.Name, ra.Namespace, rv.Status.Allowed, c.allowed)
		}
	}
}
