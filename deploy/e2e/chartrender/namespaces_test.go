package chartrender

import (
	"testing"
)

// With a job namespace other than the release's, serve is told both: the
// Jobs go to jobNamespace, the Lease and the status ConfigMap stay beside
// the Roles that allow them, in the release namespace.
func TestJobNamespaceApartFromTheRelease(t *testing.T) {
	objs := mustRender(t, `jobNamespace: power-jobs`)
	a := args(t, objs)
	if a["--namespace"] != "power-jobs" || a["--release-namespace"] != "ns" {
		t.Errorf("--namespace=%q --release-namespace=%q, want power-jobs and ns", a["--namespace"], a["--release-namespace"])
	}
	for name, ns := range map[string]string{
		"claimstream-jobs":      "power-jobs",
		"claimstream-leader":    "ns",
		"claimstream-namespace": "ns",
	} {
		for _, kind := range []string{"Role", "RoleBinding"} {
			if got := mustFind(t, objs, kind, name).GetNamespace(); got != ns {
				t.Errorf("%s %s in namespace %q, want %q", kind, name, got, ns)
			}
		}
	}
}

func TestKubeAPIRateLimit(t *testing.T) {
	a := args(t, mustRender(t, ``))
	if a["--kube-api-qps"] != "200" || a["--kube-api-burst"] != "300" {
		t.Errorf("defaults: --kube-api-qps=%q --kube-api-burst=%q, want 200 and 300", a["--kube-api-qps"], a["--kube-api-burst"])
	}
	a = args(t, mustRender(t, `kubeAPI: {qps: 50.5, burst: 80}`))
	if a["--kube-api-qps"] != "50.5" || a["--kube-api-burst"] != "80" {
		t.Errorf("--kube-api-qps=%q --kube-api-burst=%q, want 50.5 and 80", a["--kube-api-qps"], a["--kube-api-burst"])
	}
	mustErr(t, `kubeAPI: {qps: 0}`, "qps")
	mustErr(t, `kubeAPI: {burst: 0}`, "burst")
	mustErr(t, `kubeAPI: {qsp: 10}`, "qsp")
}
