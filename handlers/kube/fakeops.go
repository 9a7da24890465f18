package kube

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
)

// What a simulated cluster does to its objects: the simulator's machines
// and the reactor tests use these to play kubelet, Job controller and
// machine.

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

// FinishJob marks a Job Complete (ok) or Failed with reason at time at.
func (f *Fake) FinishJob(ctx context.Context, ns, name string, ok bool, reason, message string, at time.Time) error {
	j, err := f.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
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
	_, err = f.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
	return err
}

// RegisterNode creates (or re-registers) a NotReady Node with the given
// providerID and taints, created at `at`.
func (f *Fake) RegisterNode(ctx context.Context, name, providerID string, taints []events.Taint, at time.Time) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(at), Labels: map[string]string{"kubernetes.io/hostname": name}},
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
func (f *Fake) SetNodeReady(ctx context.Context, name string, ready bool, at time.Time) error {
	n, err := f.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
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
	_, err = f.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// RemoveNodeTaints removes the taints with the given keys; a missing Node
// is no error.
func (f *Fake) RemoveNodeTaints(ctx context.Context, name string, keys ...string) error {
	n, err := f.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
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
	_, err = f.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	return err
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
