package suite

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/claimstream/claimstream/deploy/e2e/chartrender"
	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// The kubectl plugin on the real API server, against the chart installed
// object by object: with the admin kubeconfig and -n, or with a context
// whose namespace is the release's, it finds the API Service, reads the
// token from its Secret, picks the serve Pod and port-forwards to it
// through the API server and the node's kubelet API (kwok's, which
// forwards the Pod's port where a PortForward object says: to serve run as
// the StatefulSet's Pod would run it), and lists the chart's pool groups;
// in a namespace without the chart it says so.
func TestPluginFindsTheChartOnTheAPIServer(t *testing.T) {
	dumpOnFailure(t)
	ctx := ctxFor(t, 5*time.Minute)
	const ns = "plugin-e2e"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	objs, err := chartrender.Render("cs", ns, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ic, err := installChart(ctx, objs, filepath.Join(dir, "chart"))
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := ic.Listen["--api-address"]
	if apiAddr == "" || ic.ServiceAccount == "" || len(ic.Args) == 0 || ic.Args[0] != "serve" {
		t.Fatalf("the StatefulSet's container does not run serve with an API listener and a ServiceAccount: %v", ic.Args)
	}

	bin := filepath.Join(dir, "kubectl-claimstream")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kubectl-claimstream")
	build.Dir = filepath.Join(chartrender.ChartDir(), "..", "..")
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-claimstream: %v\n%s", err, out)
	}

	// A kubeconfig whose current context's namespace is the release's.
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = ns
	inNS := filepath.Join(dir, "in-ns.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, inNS); err != nil {
		t.Fatal(err)
	}

	// A Pod of the StatefulSet's template, bound to the worker node, where
	// kwok runs it (Ready); its data claim is an emptyDir, as no volume
	// binder runs. The controller's own Pod stays pending (no claim, the
	// worker's taint), so this is the one ready serve Pod.
	pod := "cs-claimstream-by-hand"
	sts, err := admin.AppsV1().StatefulSets(ns).Get(ctx, "cs-claimstream", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := *sts.Spec.Template.Spec.DeepCopy()
	spec.NodeName = workerNode
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: workerKey, Operator: corev1.TolerationOpExists})
	for _, c := range sts.Spec.VolumeClaimTemplates {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns, Labels: sts.Spec.Template.Labels}, Spec: spec}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Pods(ns).Delete(context.Background(), pod, metav1.DeleteOptions{}) })
	waitT(t, 2*time.Minute, "Pod "+pod+" ready", func() (bool, string) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podReady(p), string(p.Status.Phase)
	})

	// serve as the Pod runs it, with a token of the Pod's ServiceAccount
	// for in-cluster credentials.
	exp := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, ic.ServiceAccount, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saCfg := filepath.Join(dir, "sa.kubeconfig")
	if err := os.WriteFile(saCfg, []byte(testenv.KubeconfigToken(env.Host, env.CAPEM, ic.ServiceAccount, tr.Status.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(ic.Args), "--kubeconfig="+saCfg)
	penv := append(slices.Clone(ic.Env), "PATH="+os.Getenv("PATH"), "TMPDIR="+ic.Mounts["tmp"], "HOME="+ic.Mounts["tmp"])
	proc, err := testenv.StartProcess("claimstream-plugin", server.Bin, args, filepath.Join(env.Dir, "logs"), penv)
	if err != nil {
		t.Fatal(err)
	}
	allPids = append(allPids, proc.Pid())
	t.Cleanup(func() { proc.Stop(10 * time.Second) })
	tail := func() string {
		return "\n--- serve log tail ---\n" + testenv.TailFile(filepath.Join(env.Dir, "logs", "claimstream-plugin.log"), 3000)
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	waitT(t, 90*time.Second, "serve's /readyz", func() (bool, string) {
		if done, err := proc.Exited(); done {
			return false, fmt.Sprintf("exited: %v%s", err, tail())
		}
		resp, err := hc.Get("http://" + apiAddr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status + ": " + string(b)
	})

	// kwok forwards the Pod's http port to that serve.
	var podPort int64
	for _, c := range spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "http" {
				podPort = int64(cp.ContainerPort)
			}
		}
	}
	host, port, err := net.SplitHostPort(apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	targetPort, err := strconv.ParseInt(port, 10, 32)
	if err != nil || podPort == 0 {
		t.Fatalf("API listener %s, Pod http port %d: %v", apiAddr, podPort, err)
	}
	pf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "PortForward",
		"metadata":   map[string]any{"name": pod, "namespace": ns},
		"spec": map[string]any{"forwards": []any{map[string]any{
			"ports":  []any{podPort},
			"target": map[string]any{"address": host, "port": targetPort},
		}}},
	}}
	if err := applyDynamic(ctx, pf, false); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteDynamic(context.Background(), pf) })

	run := func(args ...string) (string, error) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(rctx, bin, args...).CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{
		{"get", "groups", "--kubeconfig", env.Kubeconfig, "-n", ns},
		{"get", "groups", "--kubeconfig", inNS},
	} {
		// kwok picks the PortForward up from its watch.
		var out string
		waitT(t, time.Minute, fmt.Sprint(args), func() (bool, string) {
			var err error
			out, err = run(args...)
			return err == nil, fmt.Sprintf("%v: %s", err, out)
		})
		t.Logf("%v: %s", args, out)
		if !hasLinePrefix(out, "homelab") {
			t.Errorf("%v: %s\nwant the chart's pool group homelab, from serve through the port-forward to %s", args, out, pod)
		}
	}
	out, err := run("get", "groups", "--kubeconfig", env.Kubeconfig, "-n", "default")
	if err == nil || !strings.Contains(out, "error: no claimstream Service in namespace default; is the chart installed?") {
		t.Errorf("-n default: %v: %s", err, out)
	}
}

func hasLinePrefix(s, prefix string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
