package suite

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/claimstream/claimstream/deploy/e2e/chartrender"
)

// The kubectl plugin on the real API server, against the chart installed
// object by object: with the admin kubeconfig and -n, or with a context
// whose namespace is the release's, it finds the API Service, reads the
// token from its Secret and picks the serve Pod, and goes as far as the
// port-forward, which this cluster cannot serve (kwok's nodes run no
// kubelet server); in a namespace without the chart it says so.
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
	if _, err := installChart(ctx, objs, filepath.Join(dir, "chart")); err != nil {
		t.Fatal(err)
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

	run := func(args ...string) string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(rctx, bin, args...).CombinedOutput()
		if err == nil {
			t.Fatalf("%v: answered without a kubelet to forward to:\n%s", args, out)
		}
		return string(out)
	}
	for _, args := range [][]string{
		{"get", "groups", "--kubeconfig", env.Kubeconfig, "-n", ns},
		{"get", "groups", "--kubeconfig", inNS},
	} {
		out := run(args...)
		t.Logf("%v: %s", args, out)
		if !strings.Contains(out, "error: port-forward to pod "+ns+"/"+pod) {
			t.Errorf("%v: %s\nwant it to find Service cs-claimstream-http and its token, then forward to %s", args, out, pod)
		}
	}
	if out := run("get", "groups", "--kubeconfig", env.Kubeconfig, "-n", "default"); !strings.Contains(out, "error: no claimstream Service in namespace default; is the chart installed?") {
		t.Errorf("-n default: %s", out)
	}
}
