package kube

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/handlers"
)

// BuildJob turns a lifecycle Job request into a batch/v1 Job: the slot's
// pod spec with restartPolicy Never and the CLAIMSTREAM_* environment in
// every container, activeDeadlineSeconds = the group's job timeout,
// backoffLimit 0, ttlSecondsAfterFinished from the spec, and no
// ownerReferences (no garbage collector may take a Job mid-shutdown).
func BuildJob(namespace string, req handlers.JobRequest) (*batchv1.Job, error) {
	var spec corev1.PodSpec
	if len(req.Spec.PodSpec) > 0 {
		if err := json.Unmarshal(req.Spec.PodSpec, &spec); err != nil {
			return nil, fmt.Errorf("job %s: decode pod spec: %w", req.Name, err)
		}
	}
	if len(spec.Containers) == 0 {
		return nil, fmt.Errorf("job %s: the pod spec has no containers", req.Name)
	}
	spec.RestartPolicy = corev1.RestartPolicyNever
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i := range spec.Containers {
		c := &spec.Containers[i]
		for _, k := range keys {
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == k })
			c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: req.Env[k]})
		}
	}
	labels := map[string]string{}
	for k, v := range req.Labels {
		labels[k] = v
	}
	ns := req.Namespace
	if ns == "" {
		ns = namespace
	}
	var deadline *int64
	if req.Timeout > 0 {
		d := int64(req.Timeout.Seconds())
		if d < 1 {
			d = 1
		}
		deadline = &d
	}
	backoff := int32(0)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: ns, Labels: labels, Annotations: maps.Clone(req.Annotations)},
		Spec: batchv1.JobSpec{
			ActiveDeadlineSeconds:   deadline,
			BackoffLimit:            &backoff,
			TTLSecondsAfterFinished: req.Spec.TTLSecondsAfterFinished,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: maps.Clone(req.Annotations)},
				Spec:       spec,
			},
		},
	}
	return job, nil
}

// JobStateOf reads what the reactors need of a Job.
func JobStateOf(j *batchv1.Job) handlers.JobState {
	st := handlers.JobState{Name: j.Name, Phase: handlers.JobRunning, Labels: j.Labels, CreatedAt: j.CreationTimestamp.Time}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			st.Phase = handlers.JobSucceeded
			st.FinishedAt = c.LastTransitionTime.Time
		case batchv1.JobFailed:
			st.Phase = handlers.JobFailed
			st.FinishedAt = c.LastTransitionTime.Time
			st.Reason, st.Message = c.Reason, c.Message
		}
	}
	if st.Phase == handlers.JobSucceeded && j.Status.CompletionTime != nil {
		st.FinishedAt = j.Status.CompletionTime.Time
	}
	return st
}
