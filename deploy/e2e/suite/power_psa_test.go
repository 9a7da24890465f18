package suite

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/kube"
)

// The pod of every power driver's Job but Wake-on-LAN's passes the API
// server's Pod Security admission at the restricted level; Wake-on-LAN's,
// in the host's network, is refused there, as docs/power.md says.
func TestPowerJobPodsUnderRestrictedPodSecurity(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	const psaNS = "claimstream-e2e-restricted"
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: psaNS, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = admin.CoreV1().Namespaces().Delete(ctx, psaNS, metav1.DeleteOptions{})
	})
	for _, p := range []events.Power{
		{Driver: events.PowerIPMI, Address: "10.0.0.21", CredentialsSecret: "bmc"},
		{Driver: events.PowerRedfish, Address: "https://10.0.0.40", CredentialsSecret: "bmc"},
		{Driver: events.PowerLibvirt, Address: "hv.lan:16509", Domain: "vm-1"},
		{Driver: events.PowerProxmox, Address: "https://pve.lan:8006", CredentialsSecret: "pve", TokenID: "root@pam!cs", Node: "pve1", VMID: 100},
		{Driver: events.PowerWoL, MAC: "52:54:00:12:34:56", Probe: "10.0.1.31:22"},
	} {
		t.Run(p.Driver, func(t *testing.T) {
			job, err := kube.BuildJob(kube.JobDefaults{Namespace: psaNS, PowerImage: "registry.example/claimstream:v1"}, handlers.JobRequest{
				Name: "psa-" + p.Driver, Operation: decide.OperationStartup, Timeout: time.Minute, Spec: events.JobSpec{Power: &p},
			})
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: psaNS}, Spec: job.Spec.Template.Spec}
			_, err = admin.CoreV1().Pods(psaNS).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if p.Driver == events.PowerWoL {
				if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "hostNetwork") {
					t.Fatalf("a Wake-on-LAN pod under restricted: %v, want it refused for hostNetwork", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused under restricted Pod Security: %v", err)
			}
		})
	}
}
