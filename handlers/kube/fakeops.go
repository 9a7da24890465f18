package kube

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
)

// What a simulated cluster does to its objects: the simulator's machines
// and the reactor tests use these to play kubelet, Job controller and
// machine. The Job controller's and the kubelet's status writes go to the
// object tracker itself, as theirs reach the apiserver's store and not
// the client under test: the clientset's reaction chain copies a Job or
// Node twice more for its record of calls, which a what-if's replays
// would pay on every Job finish and Node readiness. Informers see them as
// any write.

// StampCreation sets creationTimestamp from now() on every Node and Job
// created without one (the fake tracker sets none), and calls onJob with
// every Job created.
func (f *Fake) StampCreation(now func() time.Time, onJob func(*batchv1.Job)) {
	f.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok {
			return false, nil, nil
		}
		switch o := ca.GetObject().(type) {
		case *corev1.Node:
			if o.CreationTimestamp.IsZero() {
				o.CreationTimestamp = metav1.NewTime(now())
			}
		case *batchv1.Job:
			if o.CreationTimestamp.IsZero() {
				o.CreationTimestamp = metav1.NewTime(now())
			}
			if onJob != nil {
				if _, err := f.Tracker().Get(jobsGVR, o.Namespace, o.Name); apierrors.IsNotFound(err) {
					onJob(o.DeepCopy())
				}
			}
		}
		return false, nil, nil
	})
}

// FinishJob marks a Job Complete (ok) or Failed with reason at time at;
// the TTL controller then deletes it after its ttlSecondsAfterFinished.
func (f *Fake) FinishJob(_ context.Context, ns, name string, ok bool, reason, message string, at time.Time) error {
	obj, err := f.tracker.Get(jobsGVR, ns, name)
	if err != nil {
		return err
	}
	j := obj.(*batchv1.Job)
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return nil // finished already
		}
	}
	t := metav1.NewTime(at)
	cond := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: t, LastProbeTime: t}
	if ok {
		j.Status.CompletionTime = &t
		j.Status.Succeeded = 1
	} else {
		cond.Type, cond.Reason, cond.Message = batchv1.JobFailed, reason, message
		j.Status.Failed = 1
	}
	j.Status.Conditions = append(j.Status.Conditions, cond)
	if err := f.tracker.Update(jobsGVR, j, ns); err != nil {
		return err
	}
	f.expireFinished(j)
	return nil
}

// JobPodTerminated plays the pod of Job job ending: its container
// terminated with exit code and termination message msg (a provisioning
// Job's report, a power driver's failure), as the kubelet reports it.
func (f *Fake) JobPodTerminated(ctx context.Context, ns, job string, exitCode int32, msg string, at time.Time) error {
	phase := corev1.PodSucceeded
	if exitCode != 0 {
		phase = corev1.PodFailed
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job + "-pod", Namespace: ns, Labels: map[string]string{"batch.kubernetes.io/job-name": job}},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "job", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Message: msg, FinishedAt: metav1.NewTime(at),
			}},
		}}},
	}
	_, err := f.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// RegisterNode creates (or re-registers) a NotReady Node with the given
// providerID and taints, created at `at`.
func (f *Fake) RegisterNode(ctx context.Context, name, providerID string, taints []events.Taint, at time.Time) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(at), Labels: map[string]string{"kubernetes.io/hostname": handlers.LabelValue(name)}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(at)},
		}},
	}
	for _, t := range taints {
		n.Spec.Taints = append(n.Spec.Taints, TaintOf(t))
	}
	_, err := f.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		old, gerr := f.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		old.Spec.Taints = n.Spec.Taints
		old.Spec.ProviderID = providerID
		old.Status.Conditions = n.Status.Conditions
		_, err = f.CoreV1().Nodes().Update(ctx, old, metav1.UpdateOptions{})
	}
	return err
}

// SetNodeReady sets the Node's Ready condition; a missing Node is no error.
func (f *Fake) SetNodeReady(_ context.Context, name string, ready bool, at time.Time) error {
	n, err := f.trackedNode(name)
	if n == nil {
		return err
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	found := false
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			if n.Status.Conditions[i].Status == st {
				return nil
			}
			n.Status.Conditions[i].Status = st
			n.Status.Conditions[i].LastTransitionTime = metav1.NewTime(at)
			found = true
		}
	}
	if !found {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: st, LastTransitionTime: metav1.NewTime(at)})
	}
	return f.tracker.Update(nodesGVR, n, "")
}

// RemoveNodeTaints removes the taints with the given keys; a missing Node
// is no error.
func (f *Fake) RemoveNodeTaints(_ context.Context, name string, keys ...string) error {
	n, err := f.trackedNode(name)
	if n == nil {
		return err
	}
	var kept []corev1.Taint
	for _, t := range n.Spec.Taints {
		drop := false
		for _, k := range keys {
			drop = drop || t.Key == k
		}
		if !drop {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(n.Spec.Taints) {
		return nil
	}
	n.Spec.Taints = kept
	return f.tracker.Update(nodesGVR, n, "")
}

// trackedNode is a copy of the Node from the object tracker; nil and no
// error when there is none.
func (f *Fake) trackedNode(name string) (*corev1.Node, error) {
	obj, err := f.tracker.Get(nodesGVR, "", name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Node), nil
}

// DeleteNodeObject deletes a Node; a missing one is no error.
func (f *Fake) DeleteNodeObject(ctx context.Context, name string) error {
	err := f.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// DeleteJob deletes a Job (the TTL controller); a missing one is no error.
func (f *Fake) DeleteJob(ctx context.Context, ns, name string) error {
	err := f.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

var (
	podsGVR = corev1.SchemeGroupVersion.WithResource("pods")
	pdbsGVR = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
)

// evictionReaction plays the API server's eviction subresource (policy/v1):
// a pod whose PodDisruptionBudgets allow no disruption now is refused with
// 429 TooManyRequests; otherwise the pod is deleted. The budget is computed
// from the pods the fake holds (there is no disruption controller).
func (f *Fake) evictionReaction(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ca, ok := a.(k8stesting.CreateAction)
	if !ok {
		return false, nil, nil
	}
	ev, ok := ca.GetObject().(*policyv1.Eviction)
	if !ok {
		return true, nil, apierrors.NewBadRequest("not an Eviction")
	}
	ns := a.GetNamespace()
	obj, err := f.tracker.Get(podsGVR, ns, ev.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod)
	if allowed, name, err := f.disruptionsAllowed(pod); err != nil {
		return true, nil, err
	} else if allowed < 1 {
		return true, nil, apierrors.NewTooManyRequests(fmt.Sprintf("Cannot evict pod as it would violate the pod's disruption budget %s.", name), 10)
	}
	if err := f.tracker.Delete(podsGVR, ns, ev.Name); err != nil {
		return true, nil, err
	}
	return true, ev, nil
}

// disruptionsAllowed is the least of the pod's budgets (a large number
// when none selects it).
func (f *Fake) disruptionsAllowed(pod *corev1.Pod) (int, string, error) {
	obj, err := f.tracker.List(pdbsGVR, policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), pod.Namespace)
	if err != nil {
		return 0, "", err
	}
	pobj, err := f.tracker.List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), pod.Namespace)
	if err != nil {
		return 0, "", err
	}
	pods := pobj.(*corev1.PodList).Items
	least, name := 1<<30, ""
	for _, pdb := range obj.(*policyv1.PodDisruptionBudgetList).Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		expected, healthy := 0, 0
		for _, p := range pods {
			if !sel.Matches(labels.Set(p.Labels)) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			expected++
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				healthy++
			}
		}
		allowed := 1 << 30
		switch {
		case pdb.Spec.MinAvailable != nil:
			n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, expected, true)
			if err != nil {
				return 0, "", err
			}
			allowed = healthy - n
		case pdb.Spec.MaxUnavailable != nil:
			n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, expected, true)
			if err != nil {
				return 0, "", err
			}
			allowed = n - (expected - healthy)
		}
		if allowed < least {
			least, name = allowed, pdb.Name
		}
	}
	return least, name, nil
}
