package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/scale"
)

// The simulated work: pods the tests apply run for a while on a Node the
// simulated scheduler binds them to, then succeed; the eviction API (the
// fake's, honouring PodDisruptionBudgets) removes them.

// AnnotationRunsFor is how long a simulated pod runs once bound.
const AnnotationRunsFor = "sim.claimstream.dev/runs-for"

// PodSpec is one simulated pod.
type PodSpec struct {
	Namespace string
	Name      string
	// RunsFor: the pod succeeds this long after it is bound; 0 runs forever.
	RunsFor time.Duration
	Labels  map[string]string
	Owner   *metav1.OwnerReference
	// Node binds the pod at once (a DaemonSet's pod, a pod already placed).
	Node string
}

// RunPod creates a Pending pod for the simulated scheduler.
func (s *Sim) RunPod(ctx context.Context, p PodSpec) error {
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
			Annotations: map[string]string{AnnotationRunsFor: p.RunsFor.String()}, CreationTimestamp: metav1.NewTime(s.clock.Now().UTC())},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "work", Image: "busybox"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if p.Owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*p.Owner}
	}
	if _, err := s.fake.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	if p.Node != "" {
		return s.bind(ctx, pod, p.Node, s.clock.Now().UTC())
	}
	return nil
}

// schedulePods binds every Pending, unbound pod it can to a Ready,
// schedulable Node without NoSchedule/NoExecute taints and with room
// (Timing.PodsPerNode), the least loaded first. It returns how many it bound.
func (s *Sim) schedulePods(ctx context.Context) (int, error) {
	pods, err := s.fake.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	load := map[string]int{}
	var pending []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		case p.Spec.NodeName != "":
			load[p.Spec.NodeName]++
		case scale.ControlPlane(p):
		default:
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return 0, nil
	}
	nodes, err := s.fake.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var usable []string
	for i := range nodes.Items {
		n := kube.NodeViewOf(&nodes.Items[i])
		if !n.Ready || n.Unschedulable || slices.ContainsFunc(n.Taints, func(t events.Taint) bool { return t.Effect == "NoSchedule" || t.Effect == "NoExecute" }) {
			continue
		}
		usable = append(usable, n.Name)
	}
	slices.SortStableFunc(pending, func(a, b *corev1.Pod) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	bound := 0
	now := s.clock.Now().UTC()
	for _, p := range pending {
		best := ""
		for _, n := range usable {
			if load[n] < s.timing.PodsPerNode && (best == "" || load[n] < load[best]) {
				best = n
			}
		}
		if best == "" {
			break
		}
		if err := s.bind(ctx, p, best, now); err != nil {
			return bound, err
		}
		load[best]++
		bound++
	}
	return bound, nil
}

// bind places a pod on a node, running, and schedules its success.
func (s *Sim) bind(ctx context.Context, p *corev1.Pod, node string, at time.Time) error {
	cur, err := s.fake.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cur.Spec.NodeName = node
	cur.Status.Phase = corev1.PodRunning
	st := metav1.NewTime(at)
	cur.Status.StartTime = &st
	if _, err := s.fake.CoreV1().Pods(p.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return err
	}
	d, _ := time.ParseDuration(cur.Annotations[AnnotationRunsFor])
	if d <= 0 {
		return nil
	}
	ns, name, done := p.Namespace, p.Name, at.Add(d)
	s.mu.Lock()
	s.schedule(done, func(ctx context.Context) error {
		p, err := s.fake.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.Spec.NodeName != node) {
			return nil // evicted or deleted
		}
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodSucceeded
		_, err = s.fake.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
	s.mu.Unlock()
	return nil
}

// PodsOn lists the names of the non-terminal pods bound to a node.
func (s *Sim) PodsOn(ctx context.Context, node string) ([]string, error) {
	pods, err := s.fake.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// reportInstance plays a provisioning Job's pod: succeeded, its termination
// message (msg) naming the instance it bought.
func (s *Sim) reportInstance(ctx context.Context, job, msg string, at time.Time) error {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job + "-pod", Namespace: s.ns, Labels: map[string]string{
			"batch.kubernetes.io/job-name": job, handlers.LabelOperation: decide.OperationStartup,
		}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "power", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Message: msg, FinishedAt: metav1.NewTime(at),
			}},
		}}},
	}
	_, err := s.fake.CoreV1().Pods(s.ns).Create(ctx, p, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// Reclaim is a provider-initiated loss (a spot reclaim, an instance
// terminated from the console): the cloud controller manager taints the
// Node node.cloudprovider.kubernetes.io/shutdown and the machine is gone.
func (s *Sim) Reclaim(ctx context.Context, slot string) error {
	n, err := s.fake.CoreV1().Nodes().Get(ctx, s.NodeOf(slot), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reclaim %s: %w", slot, err)
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: handlers.HostLossTaints[0], Effect: corev1.TaintEffectNoSchedule})
	if _, err := s.fake.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return s.powerOff(ctx, slot, s.clock.Now().UTC(), false)
}
