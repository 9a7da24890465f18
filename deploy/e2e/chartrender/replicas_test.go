package chartrender

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// replicas is 1 or 3: two replicas cannot keep a quorum with one down, and
// the schema says so before anything renders.
func TestReplicasOneOrThree(t *testing.T) {
	for _, n := range []int{0, 2, 4, 5} {
		mustErr(t, fmt.Sprintf("replicas: %d", n), "/replicas")
	}
	for _, n := range []int{1, 3} {
		mustRender(t, fmt.Sprintf("replicas: %d", n))
	}
}

const routeHosts = "claimstream-%d.claimstream-headless.ns.svc"

// With 3 replicas the NATS servers form one cluster through the headless
// Service: routes to every replica, the cluster listener, its password and
// route TLS files, all mounted from the Secrets the chart renders.
func TestThreeReplicasFormOneCluster(t *testing.T) {
	objs := mustRender(t, "replicas: 3")
	a := args(t, objs)
	var want []string
	for i := range 3 {
		want = append(want, "nats-route://"+fmt.Sprintf(routeHosts, i)+":6222")
	}
	if got := a["--nats-routes"]; got != strings.Join(want, ",") {
		t.Errorf("--nats-routes = %q, want %q", got, strings.Join(want, ","))
	}
	for flag, want := range map[string]string{
		"--replicas":                   "3",
		"--replica-name":               "$(POD_NAME)",
		"--nats-cluster-listen":        "0.0.0.0:6222",
		"--nats-cluster-password-file": "/etc/claimstream/nats-cluster/password",
		"--nats-cluster-tls-cert":      "/etc/claimstream/route-tls/tls.crt",
		"--nats-cluster-tls-key":       "/etc/claimstream/route-tls/tls.key",
		"--nats-cluster-tls-ca":        "/etc/claimstream/route-tls/ca.crt",
		"--leader-elect":               "true",
	} {
		if a[flag] != want {
			t.Errorf("%s = %q, want %q", flag, a[flag], want)
		}
	}
	sts := mustFind(t, objs, "StatefulSet", "claimstream")
	if p := str(t, sts.Object, "spec", "podManagementPolicy"); p != "Parallel" {
		t.Errorf("podManagementPolicy %s, want Parallel", p)
	}
	if s := str(t, sts.Object, "spec", "serviceName"); s != "claimstream-headless" {
		t.Errorf("serviceName %s", s)
	}
	headless := mustFind(t, objs, "Service", "claimstream-headless")
	if pub, _, _ := unstructured.NestedBool(headless.Object, "spec", "publishNotReadyAddresses"); !pub {
		t.Error("the headless Service must publish not-ready addresses: peers meet before they are ready")
	}
	if !servicePort(headless, "routes", 6222) {
		t.Errorf("headless Service has no routes port 6222: %v", headless.Object["spec"])
	}
	if !containerPort(server(t, objs), "routes", 6222) {
		t.Error("the container does not declare the routes port")
	}
	// Every file the flags name comes from a mounted volume of a rendered Secret.
	mounts := map[string]string{}
	for _, m := range server(t, objs)["volumeMounts"].([]any) {
		m := m.(map[string]any)
		mounts[m["name"].(string)] = m["mountPath"].(string)
	}
	vols, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "volumes")
	secretOf := map[string]string{}
	for _, v := range vols {
		v := v.(map[string]any)
		if s, ok := v["secret"].(map[string]any); ok {
			secretOf[v["name"].(string)] = s["secretName"].(string)
		}
	}
	for vol, dir := range map[string]string{"nats-cluster": "/etc/claimstream/nats-cluster", "route-tls": "/etc/claimstream/route-tls"} {
		if mounts[vol] != dir {
			t.Errorf("volume %s mounted at %q, want %s", vol, mounts[vol], dir)
		}
		if find(objs, "Secret", secretOf[vol]) == nil {
			t.Errorf("volume %s: Secret %q is not rendered", vol, secretOf[vol])
		}
	}
	pw := mustFind(t, objs, "Secret", "claimstream-nats-cluster")
	if p, _ := base64.StdEncoding.DecodeString(str(t, pw.Object, "data", "password")); len(p) < 32 {
		t.Errorf("route password of %d bytes", len(p))
	}
}

// One replica: no cluster flags, no routes port, no cluster Secrets.
func TestOneReplicaHasNoCluster(t *testing.T) {
	objs := mustRender(t, "")
	a := args(t, objs)
	for _, f := range []string{"--nats-routes", "--nats-cluster-listen", "--nats-cluster-password-file", "--nats-cluster-tls-cert"} {
		if _, ok := a[f]; ok {
			t.Errorf("one replica renders %s", f)
		}
	}
	if a["--replicas"] != "1" {
		t.Errorf("--replicas = %q", a["--replicas"])
	}
	if servicePort(mustFind(t, objs, "Service", "claimstream-headless"), "routes", 6222) {
		t.Error("one replica opens the routes port")
	}
	for _, n := range []string{"claimstream-nats-cluster", "claimstream-route-tls"} {
		if find(objs, "Secret", n) != nil {
			t.Errorf("one replica renders Secret %s", n)
		}
	}
}

// The generated route certificate chains to its own CA (not the
// provider's), names every replica's route host, and serves as both server
// and client (each route dials and is dialled).
func TestGeneratedRouteCertificate(t *testing.T) {
	objs := mustRender(t, "replicas: 3")
	route := mustFind(t, objs, "Secret", "claimstream-route-tls")
	cert := parseCert(t, str(t, route.Object, "data", "tls.crt"))
	ca := parseCert(t, str(t, route.Object, "data", "ca.crt"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for i := range 3 {
		host := fmt.Sprintf(routeHosts, i)
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("route certificate for %s (usage %v): %v", host, usage, err)
			}
		}
	}
	provider := mustFind(t, objs, "Secret", "claimstream-server-tls")
	if str(t, provider.Object, "data", "ca.crt") == str(t, route.Object, "data", "ca.crt") {
		t.Error("routes trust the provider's CA: cluster-autoscaler's client certificate would pass as a peer")
	}
}

func TestRouteTLSModes(t *testing.T) {
	t.Run("cert-manager", func(t *testing.T) {
		objs := mustRender(t, "{replicas: 3, tls: {mode: cert-manager}}")
		c := mustFind(t, objs, "Certificate", "claimstream-route-tls")
		names, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		for i := range 3 {
			if !slices.Contains(names, fmt.Sprintf(routeHosts, i)) {
				t.Errorf("route Certificate lacks %s: %v", fmt.Sprintf(routeHosts, i), names)
			}
		}
		usages, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "usages")
		if !slices.Contains(usages, "server auth") || !slices.Contains(usages, "client auth") {
			t.Errorf("route Certificate usages %v", usages)
		}
		if issuer := str(t, c.Object, "spec", "issuerRef", "name"); issuer != "claimstream-ca" || find(objs, "Issuer", issuer) == nil {
			t.Errorf("route Certificate issuer %q is not the chart's CA Issuer", issuer)
		}
	})
	t.Run("existing needs the route Secret", func(t *testing.T) {
		mustErr(t, "{replicas: 3, tls: {mode: existing, serverSecret: s, clientSecret: c}}", "tls.routeSecret")
		objs := mustRender(t, "{replicas: 3, tls: {mode: existing, serverSecret: s, clientSecret: c, routeSecret: r}}")
		sts := mustFind(t, objs, "StatefulSet", "claimstream")
		if !strings.Contains(fmt.Sprint(sts.Object), "secretName:r]") {
			t.Errorf("route-tls volume does not use Secret r: %v", sts.Object["spec"])
		}
	})
	t.Run("off", func(t *testing.T) {
		objs := mustRender(t, "{replicas: 3, nats: {cluster: {tls: false}}}")
		if _, ok := args(t, objs)["--nats-cluster-tls-cert"]; ok {
			t.Error("route TLS flags with nats.cluster.tls=false")
		}
		if find(objs, "Secret", "claimstream-route-tls") != nil {
			t.Error("route Secret rendered with nats.cluster.tls=false")
		}
	})
	t.Run("existing password Secret", func(t *testing.T) {
		objs := mustRender(t, "{replicas: 3, nats: {cluster: {existingPasswordSecret: mine}}}")
		if find(objs, "Secret", "claimstream-nats-cluster") != nil {
			t.Error("password Secret generated although one is given")
		}
		if !strings.Contains(fmt.Sprint(mustFind(t, objs, "StatefulSet", "claimstream").Object), "secretName:mine") {
			t.Error("the given password Secret is not mounted")
		}
	})
}

// With 3 replicas the provider and API Services reach only the Pod the
// leader labelled; metrics and the headless Service reach every replica.
// With one there is nothing to choose, and nothing waits for a label.
func TestServicesSelectTheLeader(t *testing.T) {
	for _, c := range []struct {
		doc    string
		leader bool
	}{{"replicas: 3", true}, {"replicas: 1", false}} {
		objs := mustRender(t, c.doc)
		for name, wantLeader := range map[string]bool{
			"claimstream-grpc": c.leader, "claimstream-http": c.leader,
			"claimstream-metrics": false, "claimstream-headless": false,
		} {
			svc := mustFind(t, objs, "Service", name)
			sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
			if got := sel["claimstream.dev/leader"] == "true"; got != wantLeader {
				t.Errorf("%s: Service %s selects the leader: %v, want %v (%v)", c.doc, name, got, wantLeader, sel)
			}
			if sel["app.kubernetes.io/instance"] != "claimstream" || sel["app.kubernetes.io/component"] != "server" {
				t.Errorf("%s: Service %s selector %v", c.doc, name, sel)
			}
		}
	}
}

// The leader labels its own Pod; the Events and the status ConfigMap are
// written in the release namespace.
func TestNamespaceRBAC(t *testing.T) {
	objs := mustRender(t, "replicas: 3")
	role := mustFind(t, objs, "Role", "claimstream-namespace")
	if role.GetNamespace() != "ns" {
		t.Errorf("Role in %s", role.GetNamespace())
	}
	grants := map[string][]string{}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for _, r := range rules {
		r := r.(map[string]any)
		names, _, _ := unstructured.NestedStringSlice(r, "resourceNames")
		for _, g := range r["apiGroups"].([]any) {
			for _, res := range r["resources"].([]any) {
				for _, v := range r["verbs"].([]any) {
					k := fmt.Sprintf("%s/%s", g, res)
					if len(names) > 0 {
						k += "[" + strings.Join(names, ",") + "]"
					}
					grants[k] = append(grants[k], v.(string))
				}
			}
		}
	}
	for k, verbs := range map[string][]string{
		"/pods":                           {"get", "list", "patch"},
		"events.k8s.io/events":            {"create", "patch", "update"},
		"/events":                         {"create", "patch"},
		"/configmaps":                     {"create"},
		"/configmaps[claimstream-status]": {"get", "list", "watch", "update", "patch"},
	} {
		for _, v := range verbs {
			if !slices.Contains(grants[k], v) {
				t.Errorf("Role lacks %s on %s (has %v)", v, k, grants)
			}
		}
	}
	// No other ConfigMap of the namespace is readable.
	for _, verb := range []string{"get", "list", "watch", "update"} {
		if slices.Contains(grants["/configmaps"], verb) {
			t.Errorf("Role grants %s on every ConfigMap", verb)
		}
	}
	rb := mustFind(t, objs, "RoleBinding", "claimstream-namespace")
	if str(t, rb.Object, "roleRef", "name") != "claimstream-namespace" {
		t.Error("RoleBinding binds another Role")
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want bool
	}{
		{"replicas: 3", true},
		{"replicas: 1", false},
		{"{replicas: 1, podDisruptionBudget: {enabled: true}}", true},
		{"{replicas: 3, podDisruptionBudget: {enabled: false}}", false},
	} {
		objs := mustRender(t, c.doc)
		pdb := find(objs, "PodDisruptionBudget", "claimstream")
		if (pdb != nil) != c.want {
			t.Errorf("%s: PDB rendered %v, want %v", c.doc, pdb != nil, c.want)
			continue
		}
		if pdb != nil {
			if mu, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(mu) != "1" {
				t.Errorf("%s: maxUnavailable %v", c.doc, mu)
			}
			sel, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
			if sel["app.kubernetes.io/component"] != "server" {
				t.Errorf("%s: PDB selects %v", c.doc, sel)
			}
		}
	}
	mustErr(t, "podDisruptionBudget: {enabled: sometimes}", "podDisruptionBudget")
}

func TestPodAntiAffinity(t *testing.T) {
	aff := func(doc string) map[string]any {
		sts := mustFind(t, mustRender(t, doc), "StatefulSet", "claimstream")
		a, _, _ := unstructured.NestedMap(sts.Object, "spec", "template", "spec", "affinity", "podAntiAffinity")
		return a
	}
	if a := aff("replicas: 3"); a["preferredDuringSchedulingIgnoredDuringExecution"] == nil || a["requiredDuringSchedulingIgnoredDuringExecution"] != nil {
		t.Errorf("default anti-affinity with 3 replicas: %v", a)
	}
	if a := aff("{replicas: 3, podAntiAffinity: required}"); a["requiredDuringSchedulingIgnoredDuringExecution"] == nil {
		t.Errorf("required anti-affinity: %v", a)
	}
	if a := aff("{replicas: 3, podAntiAffinity: none}"); a != nil {
		t.Errorf("podAntiAffinity none: %v", a)
	}
	if a := aff("replicas: 1"); a != nil {
		t.Errorf("one replica: %v", a)
	}
	mustErr(t, "podAntiAffinity: hard", "podAntiAffinity")
}

func parseCert(t *testing.T, b64 string) *x509.Certificate {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("no PEM in %q", raw)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func servicePort(svc *unstructured.Unstructured, name string, port int64) bool {
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	for _, p := range ports {
		p := p.(map[string]any)
		if p["name"] == name && fmt.Sprint(p["port"]) == fmt.Sprint(port) {
			return true
		}
	}
	return false
}

func containerPort(c map[string]any, name string, port int64) bool {
	ports, _ := c["ports"].([]any)
	for _, p := range ports {
		p := p.(map[string]any)
		if p["name"] == name && fmt.Sprint(p["containerPort"]) == fmt.Sprint(port) {
			return true
		}
	}
	return false
}
