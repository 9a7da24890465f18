package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/provider/rest/resttest"
)

const ns = "claimstream"

// release is what the chart renders for one release, as far as the plugin
// reads it: the API Service, a serve Pod behind it and the token Secret.
type release struct {
	name, clusterIP string
	port            int32
	ready           bool
	tlsSecret       string
}

func (r release) objects(token string) []runtime.Object {
	full := r.name + "-claimstream"
	sel := map[string]string{"app.kubernetes.io/name": "claimstream", "app.kubernetes.io/instance": r.name, "app.kubernetes.io/component": "server"}
	chart := map[string]string{"app.kubernetes.io/name": "claimstream", "app.kubernetes.io/instance": r.name, "helm.sh/chart": "claimstream-0.1.0"}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: full + "-http", Namespace: ns, Labels: chart},
		Spec: corev1.ServiceSpec{ClusterIP: r.clusterIP, Selector: sel, Ports: []corev1.ServicePort{
			{Name: "http", Port: r.port, TargetPort: intstr.FromString("http")},
		}},
	}
	// The chart's other Services carry its labels but no http port.
	grpc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: full + "-grpc", Namespace: ns, Labels: chart},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Name: "grpc", Port: 8086}}},
	}
	status := corev1.ConditionFalse
	if r.ready {
		status = corev1.ConditionTrue
	}
	c := corev1.Container{
		Name:  "claimstream",
		Args:  []string{"serve", "--api-address=:8087"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8087}},
		Env: []corev1.EnvVar{{Name: "CLAIMSTREAM_API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: full + "-api-token"}, Key: "token",
		}}}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: full + "-0", Namespace: ns, Labels: sel},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
	objs := []runtime.Object{svc, grpc, pod}
	if token != "" {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: full + "-api-token", Namespace: ns}, Data: map[string][]byte{"token": []byte(token + "\n")}})
	}
	if r.tlsSecret != "" {
		pod.Spec.Containers[0].Args = append(pod.Spec.Containers[0].Args, "--api-tls-cert=/etc/claimstream/tls/tls.crt")
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/claimstream/tls"}}
		pod.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: r.tlsSecret}}}}
	}
	return objs
}

// The plugin finds the release's Service, a ready Pod, the token (from
// the Secret the Pod's CLAIMSTREAM_API_TOKEN names) and, with TLS, the CA;
// what it cannot find it says, naming the namespace and what to do.
func TestPluginDiscovery(t *testing.T) {
	ctx := context.Background()
	one := release{name: "prod", clusterIP: "10.0.0.7", port: 8087, ready: true}

	cs := fake.NewClientset(one.objects("s3cret")...)
	tg, err := discover(ctx, cs, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	if tg.service.Name != "prod-claimstream-http" || tg.token != "s3cret" || tg.pod == nil || tg.podPort != 8087 || tg.serviceAddr() != "10.0.0.7:8087" || tg.scheme() != "http" {
		t.Fatalf("found %+v", tg)
	}

	notReady := one
	notReady.ready = false
	tg, err = discover(ctx, fake.NewClientset(notReady.objects("s3cret")...), ns, "")
	if err != nil || tg.pod != nil {
		t.Fatalf("a Pod that is not ready is no port-forward target: %+v, %v", tg, err)
	}

	withTLS := one
	withTLS.tlsSecret = "prod-claimstream-server-tls"
	objs := append(withTLS.objects("s3cret"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: withTLS.tlsSecret, Namespace: ns}, Data: map[string][]byte{"ca.crt": []byte("PEM")}})
	if tg, err = discover(ctx, fake.NewClientset(objs...), ns, ""); err != nil || string(tg.caPEM) != "PEM" || tg.scheme() != "https" {
		t.Fatalf("TLS: %+v, %v", tg, err)
	}

	two := append(one.objects("a"), release{name: "staging", clusterIP: "10.0.0.8", port: 8087, ready: true}.objects("b")...)
	if tg, err = discover(ctx, fake.NewClientset(two...), ns, "staging"); err != nil || tg.token != "b" {
		t.Fatalf("--release staging: %+v, %v", tg, err)
	}

	forbidden := fake.NewClientset(one.objects("s3cret")...)
	forbidden.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "", errors.New(`User "dev" cannot list resource "services"`))
	})
	secretForbidden := fake.NewClientset(one.objects("s3cret")...)
	secretForbidden.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "prod-claimstream-api-token", errors.New(`User "dev" cannot get resource "secrets"`))
	})
	for name, c := range map[string]struct {
		cs      kubernetes.Interface
		release string
		want    string
	}{
		"none":                 {fake.NewClientset(), "", "no claimstream Service in namespace claimstream; is the chart installed? (looked for label app.kubernetes.io/name=claimstream and a port named http"},
		"two charts":           {fake.NewClientset(two...), "", "2 claimstream releases in namespace claimstream: prod (Service prod-claimstream-http), staging (Service staging-claimstream-http); pick one with --release NAME"},
		"unknown release":      {fake.NewClientset(two...), "dev", "no claimstream Service in namespace claimstream; is the chart installed? (looked for label app.kubernetes.io/name=claimstream,app.kubernetes.io/instance=dev"},
		"token Secret missing": {fake.NewClientset(one.objects("")...), "", "cannot get Secret prod-claimstream-api-token (the API token) in namespace claimstream: not found"},
		"RBAC on Services":     {forbidden, "", "cannot list Services in namespace claimstream: forbidden by RBAC"},
		"RBAC on the Secret":   {secretForbidden, "", "cannot get Secret prod-claimstream-api-token (the API token) in namespace claimstream: forbidden by RBAC"},
		"TLS without its CA":   {fake.NewClientset(withTLS.objects("s3cret")...), "", "cannot get Secret prod-claimstream-server-tls (the API's TLS CA) in namespace claimstream: not found"},
	} {
		_, err := discover(ctx, c.cs, ns, c.release)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %s", name, err, c.want)
		}
	}
}

// runPlugin runs one kubectl claimstream invocation with the given
// clients, and returns stdout and the error.
func runPlugin(t *testing.T, cs kubernetes.Interface, fw forwarder, args ...string) (string, error) {
	t.Helper()
	p := &plugin{clients: func() (kubernetes.Interface, forwarder, string, error) { return cs, fw, ns, nil }}
	root := newRoot(p)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// The verbs reach a real API (resttest: the REST API over an embedded
// JetStream log) through the Service when it answers, and through a
// port-forward to the serve Pod when it does not, with the token from the
// Secret; --port-forward never says the Service is unreachable.
func TestPluginConnects(t *testing.T) {
	f := resttest.Scripted(t)
	u, err := url.Parse(f.Server.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, portStr, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portStr)
	want := runWith(t, f)

	reach := release{name: "prod", clusterIP: host, port: int32(port), ready: true}
	noForward := func(context.Context, *corev1.Pod, int32) (string, error) {
		t.Error("port-forwarded to a reachable Service")
		return "", errors.New("no")
	}
	got, err := runPlugin(t, fake.NewClientset(reach.objects(resttest.Token)...), noForward, "get", "groups")
	if err != nil || got != want {
		t.Fatalf("through the Service: %v\n%s\nwant\n%s", err, got, want)
	}

	// A Service address nothing listens on: as a ClusterIP seen from
	// outside the cluster.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr)
	ln.Close()
	away := release{name: "prod", clusterIP: "127.0.0.1", port: int32(closed.Port), ready: true}
	var forwardedTo string
	fw := func(_ context.Context, pod *corev1.Pod, port int32) (string, error) {
		forwardedTo = pod.Name + ":" + strconv.Itoa(int(port))
		return u.Host, nil
	}
	got, err = runPlugin(t, fake.NewClientset(away.objects(resttest.Token)...), fw, "get", "groups", "-n", ns)
	if err != nil || got != want || forwardedTo != "prod-claimstream-0:8087" {
		t.Fatalf("through a port-forward (to %q): %v\n%s\nwant\n%s", forwardedTo, err, got, want)
	}

	// Something else takes the connection (a proxy on the way): not the
	// API, so forward too.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	oport, _ := strconv.Atoi(other.URL[strings.LastIndex(other.URL, ":")+1:])
	proxied := release{name: "prod", clusterIP: "127.0.0.1", port: int32(oport), ready: true}
	forwardedTo = ""
	got, err = runPlugin(t, fake.NewClientset(proxied.objects(resttest.Token)...), fw, "get", "groups")
	if err != nil || got != want || forwardedTo != "prod-claimstream-0:8087" {
		t.Fatalf("past a proxy, through a port-forward (to %q): %v\n%s", forwardedTo, err, got)
	}

	_, err = runPlugin(t, fake.NewClientset(away.objects(resttest.Token)...), fw, "get", "groups", "--port-forward", "never")
	if err == nil || !strings.Contains(err.Error(), "cannot reach claimstream at http://127.0.0.1:"+strconv.Itoa(closed.Port)) {
		t.Fatalf("--port-forward never, unreachable: %v", err)
	}

	notReady := away
	notReady.ready = false
	_, err = runPlugin(t, fake.NewClientset(notReady.objects(resttest.Token)...), fw, "get", "groups")
	if err == nil || !strings.Contains(err.Error(), "is not reachable from here") || !strings.Contains(err.Error(), "no ready serve Pod") {
		t.Fatalf("unreachable, no ready Pod: %v", err)
	}

	_, err = runPlugin(t, fake.NewClientset(reach.objects("wrong-token")...), noForward, "get", "groups")
	if err == nil || !strings.Contains(err.Error(), `the token came from key "token" of Secret prod-claimstream-api-token in namespace claimstream`) {
		t.Fatalf("a refused token: %v", err)
	}

	// --server and --token still name an API by hand.
	got, err = runPlugin(t, fake.NewClientset(), noForward, "get", "groups", "--server", f.Server.URL, "--token", resttest.Token)
	if err != nil || got != want {
		t.Fatalf("--server: %v\n%s", err, got)
	}
}

// runWith is `get groups` against the fixture through --server: what the
// plugin must print too.
func runWith(t *testing.T, f *resttest.Fixture) string {
	t.Helper()
	out, err := runPlugin(t, fake.NewClientset(), nil, "get", "groups", "--server", f.Server.URL, "--token", resttest.Token, "--cli-config", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "homelab") {
		t.Fatalf("get groups: %s", out)
	}
	return out
}
