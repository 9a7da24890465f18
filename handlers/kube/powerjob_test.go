package kube_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/kube"
)

// A power driver's Job: the claimstream image, no shell, the Secret
// mounted read-only and named nowhere else, no token, no privilege, the
// slot's environment, and a wait shorter than the Job's deadline.
func TestPowerJobPod(t *testing.T) {
	p := &events.Power{Driver: events.PowerIPMI, Address: "10.0.0.21", CredentialsSecret: "bmc-rack", Hard: true}
	job, err := kube.BuildJob(kube.JobDefaults{Namespace: "jobs", PowerImage: "registry.example/claimstream:v1"}, handlers.JobRequest{
		Name: "a-1-startup", Slot: "a", Operation: decide.OperationStartup, Timeout: 5 * time.Minute,
		Spec: events.JobSpec{Power: p}, Env: map[string]string{"CLAIMSTREAM_SLOT": "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ps := job.Spec.Template.Spec
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	if c.Image != "registry.example/claimstream:v1" || c.Command[0] != kube.PowerCommand {
		t.Errorf("image %s command %v", c.Image, c.Command)
	}
	if got := strings.Join(c.Args, " "); !strings.HasPrefix(got, "power on --driver ipmi --timeout 4m30s ") || strings.Contains(got, "--hard") {
		t.Errorf("args %q: want power on, a wait under the 5m deadline, and --hard only for off", got)
	}
	if *job.Spec.ActiveDeadlineSeconds != 300 || ps.RestartPolicy != "Never" {
		t.Errorf("deadline %d restart %s", *job.Spec.ActiveDeadlineSeconds, ps.RestartPolicy)
	}
	sc := c.SecurityContext
	if sc == nil || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("security context %+v", sc)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken || ps.HostNetwork {
		t.Errorf("token %v hostNetwork %v", ps.AutomountServiceAccountToken, ps.HostNetwork)
	}
	if len(ps.Volumes) != 1 || ps.Volumes[0].Secret == nil || ps.Volumes[0].Secret.SecretName != "bmc-rack" ||
		len(c.VolumeMounts) != 1 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].MountPath != kube.PowerCredentialsPath {
		t.Errorf("volumes %+v mounts %+v", ps.Volumes, c.VolumeMounts)
	}
	if job.Labels[handlers.LabelPowerDriver] != "ipmi" || job.Spec.Template.Labels[handlers.LabelPowerDriver] != "ipmi" {
		t.Errorf("labels %v, pod %v: want the driver", job.Labels, job.Spec.Template.Labels)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "CLAIMSTREAM_SLOT" {
		t.Errorf("env %+v", c.Env)
	}
	raw, _ := json.Marshal(job)
	if n := strings.Count(string(raw), "bmc-rack"); n != 1 {
		t.Errorf("the Secret's name appears %d times in the Job; want once, in its volume", n)
	}

	// The shutdown Job of the same slot: off, hard as the pool asks.
	job, err = kube.BuildJob(kube.JobDefaults{Namespace: "jobs", PowerImage: "i"}, handlers.JobRequest{
		Name: "a-1-shutdown", Slot: "a", Operation: decide.OperationShutdown, Timeout: 40 * time.Second, Spec: events.JobSpec{Power: p},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "); !strings.HasPrefix(got, "power off --driver ipmi --timeout 35s ") || !strings.HasSuffix(got, " --hard") {
		t.Errorf("shutdown args %q", got)
	}
}

// Wake-on-LAN broadcasts on the machine's LAN: its Job runs in the host's
// network; without a Secret it mounts nothing.
func TestWoLJobUsesTheHostNetwork(t *testing.T) {
	job, err := kube.BuildJob(kube.JobDefaults{PowerImage: "i"}, handlers.JobRequest{
		Name: "d-1-startup", Operation: decide.OperationStartup, Timeout: time.Minute,
		Spec: events.JobSpec{Power: &events.Power{Driver: events.PowerWoL, MAC: "52:54:00:12:34:56", Probe: "10.0.1.31:22"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ps := job.Spec.Template.Spec
	if !ps.HostNetwork || len(ps.Volumes) != 0 || len(ps.Containers[0].VolumeMounts) != 0 {
		t.Errorf("hostNetwork %v volumes %+v", ps.HostNetwork, ps.Volumes)
	}
}

// Without the image serve was told to use, no power Job is built, and the
// error says which flag is missing.
func TestPowerJobNeedsTheImage(t *testing.T) {
	_, err := kube.BuildJob(kube.JobDefaults{Namespace: "jobs"}, handlers.JobRequest{
		Name: "a-1-startup", Operation: decide.OperationStartup, Spec: events.JobSpec{Power: &events.Power{Driver: events.PowerIPMI}},
	})
	if !errors.Is(err, kube.ErrNoPowerImage) || !strings.Contains(err.Error(), "--power-image") {
		t.Fatalf("err %v", err)
	}
}
