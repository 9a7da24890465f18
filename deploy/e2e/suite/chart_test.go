package suite

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

// TestChartLiveThreeReplicas installs the chart with three replicas for
// real (kwok runs the Pods on the worker node; static PVs hold their
// claims) and checks what the controllers make of it: the three Pods are
// scheduled and Ready; the gRPC and REST Services have no endpoint until
// a Pod carries the leader label, then only that Pod, and follow the label
// when it moves; the headless Service publishes every replica with the
// routes port; the PodDisruptionBudget allows one disruption.
func TestChartLiveThreeReplicas(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	const ns, release, class = "chart-live", "live", "claimstream-live"
	fullname := release + "-claimstream"
	vals := map[string]any{
		"replicas":     3,
		"nodeSelector": map[string]any{workerKey: "true"},
		"tolerations":  []any{map[string]any{"key": workerKey, "operator": "Exists"}},
		"persistence":  map[string]any{"storageClassName": class},
	}
	objs, err := chartrender.Render(release, ns, vals)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = admin.CoreV1().Namespaces().Delete(bg, ns, metav1.DeleteOptions{})
		for i := range 3 {
			_ = admin.CoreV1().PersistentVolumes().Delete(bg, fmt.Sprintf("%s-%d", class, i), metav1.DeleteOptions{})
		}
		for _, o := range objs {
			if !namespaced(o.GetKind()) {
				o.SetNamespace("")
				_ = deleteDynamic(bg, o)
			}
		}
	})
	// One static volume per replica, bound ahead to its claim.
	for i := range 3 {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", class, i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:       class,
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: fmt.Sprintf("/var/lib/claimstream-live-%d", i)}},
				ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: fmt.Sprintf("data-%s-%d", fullname, i)},
			},
		}
		if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The volume binder does not run in this control plane: the claim
		// the StatefulSet will use is made here, bound as the binder would.
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name: pv.Spec.ClaimRef.Name, Namespace: ns,
				Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"},
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &pv.Spec.StorageClassName,
				AccessModes:      pv.Spec.AccessModes,
				Resources:        corev1.VolumeResourceRequirements{Requests: pv.Spec.Capacity},
				VolumeName:       pv.Name,
			},
		}
		created, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Phase = corev1.ClaimBound
		created.Status.AccessModes = pv.Spec.AccessModes
		created.Status.Capacity = pv.Spec.Capacity
		if _, err := admin.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		if err := applyDynamic(ctx, o, false); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	podName := func(i int) string { return fmt.Sprintf("%s-%d", fullname, i) }
	waitT(t, 2*time.Minute, "three replicas Running and Ready", func() (bool, string) {
		for i := range 3 {
			p, err := admin.CoreV1().Pods(ns).Get(ctx, podName(i), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !podReady(p) {
				return false, fmt.Sprintf("%s: %s %v", p.Name, p.Status.Phase, p.Status.Conditions)
			}
		}
		return true, ""
	})
	// ready endpoints of a Service: pod name -> ports
	endpoints := func(svc string) (map[string][]int32, error) {
		l, err := admin.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
		if err != nil {
			return nil, err
		}
		out := map[string][]int32{}
		for _, s := range l.Items {
			var ports []int32
			for _, p := range s.Ports {
				if p.Port != nil {
					ports = append(ports, *p.Port)
				}
			}
			slices.Sort(ports)
			for _, e := range s.Endpoints {
				if e.TargetRef != nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
					out[e.TargetRef.Name] = ports
				}
			}
		}
		return out, nil
	}
	expect := func(what, svc string, pods ...string) {
		t.Helper()
		waitT(t, time.Minute, what, func() (bool, string) {
			got, err := endpoints(svc)
			if err != nil {
				return false, err.Error()
			}
			names := slices.Sorted(maps.Keys(got))
			return slices.Equal(names, pods), fmt.Sprintf("%s endpoints %v, want %v", svc, got, pods)
		})
	}
	all := []string{podName(0), podName(1), podName(2)}
	expect("the headless Service publishes every replica", fullname+"-headless", all...)
	if got, _ := endpoints(fullname + "-headless"); !slices.Contains(got[podName(0)], 6222) {
		t.Errorf("headless Service ports %v lack the routes port 6222", got[podName(0)])
	}
	expect("metrics reach every replica", fullname+"-metrics", all...)
	expect("no leader, no provider endpoint", fullname+"-grpc")
	expect("no leader, no API endpoint", fullname+"-http")

	label := func(pod, value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"claimstream.dev/leader":%s}}}`, value)
		if _, err := admin.CoreV1().Pods(ns).Patch(ctx, pod, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What the leader does: label its own Pod; a new leader takes it over.
	label(podName(1), `"true"`)
	expect("the provider Service reaches the leader alone", fullname+"-grpc", podName(1))
	expect("the API Service reaches the leader alone", fullname+"-http", podName(1))
	label(podName(1), "null")
	label(podName(2), `"true"`)
	expect("the provider Service follows the leader", fullname+"-grpc", podName(2))
	expect("the API Service follows the leader", fullname+"-http", podName(2))
	expect("metrics still reach every replica", fullname+"-metrics", all...)

	waitT(t, time.Minute, "the PodDisruptionBudget allows one disruption of three", func() (bool, string) {
		pdb, err := admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, fullname, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := pdb.Status
		return s.ExpectedPods == 3 && s.CurrentHealthy == 3 && s.DisruptionsAllowed == 1, fmt.Sprintf("%+v", s)
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteDynamic deletes an object created by applyDynamic.
func deleteDynamic(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := dynamicResource(o)
	if err != nil {
		return err
	}
	return ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{})
}
