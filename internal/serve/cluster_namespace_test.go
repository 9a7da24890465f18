package serve

import "testing"

// The Lease and the status ConfigMap go to the release namespace, not to
// the Jobs' one: --release-namespace, else the Pod's, else --namespace.
func TestLeaseNamespace(t *testing.T) {
	for _, c := range []struct{ flag, pod, jobs, want string }{
		{"rel", "pod-ns", "jobs", "rel"},
		{"", "pod-ns", "jobs", "pod-ns"},
		{"", "", "jobs", "jobs"},
	} {
		t.Setenv("POD_NAMESPACE", c.pod)
		o := clusterOptions{releaseNamespace: c.flag, namespace: c.jobs}
		if got := o.leaseNamespace(); got != c.want {
			t.Errorf("--release-namespace=%q POD_NAMESPACE=%q --namespace=%q: %q, want %q", c.flag, c.pod, c.jobs, got, c.want)
		}
	}
}
