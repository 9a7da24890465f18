package kube

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/internal/power/powercmd"
)

// PowerCredentialsPath is where a power Job mounts its credentials Secret:
// each key a file (powercmd.KeyUsername, ...).
const PowerCredentialsPath = "/var/run/claimstream/power"

// PowerCommand is the claimstream binary in its image.
const PowerCommand = "/usr/local/bin/claimstream"

// powerUser is the image's non-root user; the Secret's files are readable
// by its group only.
const powerUser = 65532

// ErrNoPowerImage: a slot uses a power driver and serve was not told the
// image that runs `claimstream power`.
var ErrNoPowerImage = errors.New("no power image: start serve with --power-image (the claimstream image; the chart sets it)")

// powerPodSpec is the pod of a power driver's Job: `claimstream power on`
// (startup) or `off` (shutdown) with the driver's flags, the credentials
// Secret mounted read-only, no shell, no service account token, no
// privilege. It waits for the state a little less than the Job's deadline,
// so the command, not the deadline, says why it failed.
func powerPodSpec(p *events.Power, operation, image string, deadline time.Duration) (corev1.PodSpec, error) {
	if image == "" {
		return corev1.PodSpec{}, ErrNoPowerImage
	}
	verb := "on"
	if operation == decide.OperationShutdown {
		verb = "off"
	}
	cmd, err := powercmd.Args(*p, verb, PowerCredentialsPath)
	if err != nil {
		return corev1.PodSpec{}, err
	}
	// power <verb> --driver <d> --timeout <wait> <the driver's flags>
	args := append([]string{"power"}, cmd[:3]...)
	args = append(args, "--timeout", powerWait(deadline).String())
	args = append(args, cmd[3:]...)

	no, yes := false, true
	user := int64(powerUser)
	c := corev1.Container{
		Name:    "power",
		Image:   image,
		Command: []string{PowerCommand},
		Args:    args,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             &yes,
			RunAsUser:                &user,
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	spec := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: &no,
		SecurityContext:              &corev1.PodSecurityContext{FSGroup: &user},
		// A magic packet is a broadcast on the machine's LAN, which a
		// pod's own network does not reach.
		HostNetwork: p.Driver == events.PowerWoL,
	}
	if p.CredentialsSecret != "" {
		mode := int32(0o440)
		spec.Volumes = []corev1.Volume{{
			Name:         "power-credentials",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: p.CredentialsSecret, DefaultMode: &mode}},
		}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "power-credentials", MountPath: PowerCredentialsPath, ReadOnly: true}}
	}
	spec.Containers = []corev1.Container{c}
	return spec, nil
}

// powerWait is how long the command waits for the state within a Job of
// this deadline: the deadline less a margin for the pod's start and the
// report, so the command's own failure reason reaches the log.
func powerWait(deadline time.Duration) time.Duration {
	if deadline <= 0 {
		return 5 * time.Minute
	}
	margin := deadline / 10
	margin = min(max(margin, 5*time.Second), 30*time.Second)
	if deadline <= 2*margin {
		return deadline / 2
	}
	return deadline - margin
}
