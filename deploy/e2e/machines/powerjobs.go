package machines

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// PowerCommand is the claimstream binary in its image, the command of a
// power driver's Job (kube.PowerCommand).
const PowerCommand = "/usr/local/bin/claimstream"

// maxTerminationMessage is what the kubelet keeps of a termination message.
const maxTerminationMessage = 4096

// PowerJobs plays the kubelet for the pods of power drivers' Jobs
// (labelled testenv.LabelPowerDriver), which kwok makes Running and then
// leaves alone: it runs the pod's container as a process of the test
// environment, Binary in place of the image's claimstream, with the
// pod's Secret volumes as files in a directory of its own, and ends the
// pod as the kubelet would (phase, exit code, termination message), so
// the Job controller completes or fails the Job.
type PowerJobs struct {
	Client    kubernetes.Interface
	Namespace string
	// Binary is the claimstream binary run in place of PowerCommand.
	Binary string
	Log    *slog.Logger

	mu      sync.Mutex
	started map[types.UID]bool
	runs    sync.WaitGroup
}

// Run watches the pods until ctx ends, then waits for the processes it
// started (killed by ctx's end).
func (r *PowerJobs) Run(ctx context.Context) error {
	if r.Log == nil {
		r.Log = slog.Default()
	}
	r.mu.Lock()
	r.started = map[types.UID]bool{}
	r.mu.Unlock()
	f := informers.NewSharedInformerFactoryWithOptions(r.Client, 0, informers.WithNamespace(r.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = testenv.LabelPowerDriver }))
	inf := f.Core().V1().Pods().Informer()
	handle := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.started[p.UID] {
			return
		}
		r.started[p.UID] = true
		r.runs.Add(1)
		go func() {
			defer r.runs.Done()
			r.run(ctx, p.DeepCopy())
		}()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, n any) { handle(n) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	<-ctx.Done()
	f.Shutdown()
	r.runs.Wait()
	return nil
}

// run runs the pod's one container and records its end on the pod.
func (r *PowerJobs) run(ctx context.Context, p *corev1.Pod) {
	log := r.Log.With("pod", p.Name)
	if len(p.Spec.Containers) != 1 {
		log.Error("power job: want one container", "containers", len(p.Spec.Containers))
		return
	}
	c := p.Spec.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != PowerCommand {
		log.Error("power job: not the claimstream binary", "command", c.Command)
		return
	}
	dir, err := os.MkdirTemp("", "claimstream-power-job-")
	if err != nil {
		log.Error("power job: temp dir", "err", err)
		return
	}
	defer os.RemoveAll(dir)
	args, err := r.mountSecrets(ctx, p, c, dir)
	if err != nil {
		// The kubelet does not start a container whose volume cannot be
		// mounted: the pod stays as it is until the Job's deadline.
		log.Error("power job: mount", "err", err)
		return
	}
	termLog := filepath.Join(dir, "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		log.Error("power job: termination log", "err", err)
		return
	}
	args = append(args, "--termination-log", termLog)
	cmd := exec.CommandContext(ctx, r.Binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	started := metav1.Now()
	log.Info("power job: run", "args", args)
	runErr := cmd.Run()
	finished := metav1.Now()
	if ctx.Err() != nil {
		return // the test is over: nobody reads the pod
	}
	code := int32(0)
	if runErr != nil {
		code = 128 // did not start
		if ee, ok := runErr.(*exec.ExitError); ok {
			code = int32(ee.ExitCode())
			if code < 0 {
				code = 137 // killed by a signal
			}
		}
	}
	msgB, _ := os.ReadFile(termLog)
	msg := string(msgB)
	if msg == "" && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		msg = out.String()
		if len(msg) > maxTerminationMessage {
			msg = msg[len(msg)-maxTerminationMessage:]
		}
	}
	if len(msg) > maxTerminationMessage {
		msg = msg[:maxTerminationMessage]
	}
	log.Info("power job: exited", "code", code, "message", msg, "output", out.String())
	if err := r.terminate(ctx, p, c.Name, code, msg, started, finished); err != nil {
		log.Error("power job: pod status", "err", err)
	}
}

// mountSecrets writes each Secret volume the container mounts into a
// directory under dir, as the kubelet projects it, and returns the
// container's arguments with each mount path replaced by its directory.
func (r *PowerJobs) mountSecrets(ctx context.Context, p *corev1.Pod, c corev1.Container, dir string) ([]string, error) {
	args := append([]string(nil), c.Args...)
	for i, m := range c.VolumeMounts {
		var src *corev1.SecretVolumeSource
		for _, v := range p.Spec.Volumes {
			if v.Name == m.Name {
				src = v.Secret
			}
		}
		if src == nil {
			return nil, fmt.Errorf("volume %s: only Secret volumes are played", m.Name)
		}
		s, err := r.Client.CoreV1().Secrets(p.Namespace).Get(ctx, src.SecretName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", m.Name, err)
		}
		local := filepath.Join(dir, fmt.Sprintf("volume-%d", i))
		if err := os.Mkdir(local, 0o700); err != nil {
			return nil, err
		}
		for k, v := range s.Data {
			if err := os.WriteFile(filepath.Join(local, k), v, 0o400); err != nil {
				return nil, err
			}
		}
		mount := strings.TrimSuffix(m.MountPath, "/")
		for j, a := range args {
			if a == mount || strings.HasPrefix(a, mount+"/") {
				args[j] = local + strings.TrimPrefix(a, mount)
			}
		}
	}
	return args, nil
}

// terminate records the container's end on the pod as the kubelet does:
// the container terminated with its exit code and message, the pod
// Succeeded or Failed and no longer ready.
func (r *PowerJobs) terminate(ctx context.Context, p *corev1.Pod, container string, code int32, msg string, started, finished metav1.Time) error {
	pods := r.Client.CoreV1().Pods(p.Namespace)
	phase, reason := corev1.PodSucceeded, "Completed"
	if code != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	for range 20 {
		cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.UID || cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed {
			return nil
		}
		term := &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg, StartedAt: started, FinishedAt: finished}
		found := false
		for i := range cur.Status.ContainerStatuses {
			cs := &cur.Status.ContainerStatuses[i]
			if cs.Name == container {
				cs.State = corev1.ContainerState{Terminated: term}
				cs.Ready = false
				no := false
				cs.Started = &no
				found = true
			}
		}
		if !found {
			cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: container, Image: p.Spec.Containers[0].Image, State: corev1.ContainerState{Terminated: term},
			})
		}
		for i := range cur.Status.Conditions {
			cd := &cur.Status.Conditions[i]
			if cd.Type == corev1.PodReady || cd.Type == corev1.ContainersReady {
				cd.Status, cd.Reason, cd.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", finished
			}
		}
		cur.Status.Phase = phase
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		return err
	}
	return fmt.Errorf("pod %s: too many conflicts", p.Name)
}
