package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/claimstream/claimstream/handlers"
)

// BuildJob turns a lifecycle Job request into a batch/v1 Job: the slot's
// pod spec with restartPolicy Never and the CLAIMSTREAM_* environment in
// every container, activeDeadlineSeconds = the group's job timeout,
// backoffLimit 0, no ttlSecondsAfterFinished (the spec's is claimstream's
// to honour once the Job's outcome is in the log: a TTL controller that
// removed a Job before the log saw it would let it run twice), and no
// ownerReferences (no garbage collector may take a Job mid-shutdown).
//
// A power driver's Job (req.Spec.Power) runs `claimstream power` from
// d.PowerImage (powerjob.go).
func BuildJob(d JobDefaults, req handlers.JobRequest) (*batchv1.Job, error) {
	var spec corev1.PodSpec
	driver := "" // of a power driver's Job
	switch {
	case len(req.Spec.PodSpec) > 0 && string(req.Spec.PodSpec) != "null":
		if err := json.Unmarshal(req.Spec.PodSpec, &spec); err != nil {
			return nil, fmt.Errorf("job %s: decode pod spec: %w", req.Name, err)
		}
	case req.Spec.Power != nil:
		ps, err := powerPodSpec(req.Spec.Power, req.Operation, d.PowerImage, req.Timeout)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", req.Name, err)
		}
		spec, driver = ps, req.Spec.Power.Driver
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
	if driver != "" {
		labels[handlers.LabelPowerDriver] = driver
	}
	ns := req.Namespace
	if ns == "" {
		ns = d.Namespace
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
			ActiveDeadlineSeconds: deadline,
			BackoffLimit:          &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: maps.Clone(req.Annotations)},
				Spec:       spec,
			},
		},
	}
	return job, nil
}

// JobDefaults are what a Job takes from the adapter rather than the slot.
type JobDefaults struct {
	// Namespace of a Job whose request names none.
	Namespace string
	// PowerImage runs a power driver's Job: the claimstream image.
	PowerImage string
}

// JobStateOf reads what the reactors need of a Job.
func JobStateOf(j *batchv1.Job) handlers.JobState {
	st := handlers.JobState{Name: j.Name, Phase: handlers.JobRunning, Labels: j.Labels, CreatedAt: j.CreationTimestamp.Time, OwnTTL: j.Spec.TTLSecondsAfterFinished != nil}
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

// jobSlotIndex indexes the lifecycle Jobs by their slot (SlotJobs).
const jobSlotIndex = "slot"

func indexJobsBySlot(jobs cache.SharedIndexInformer) error {
	err := jobs.AddIndexers(cache.Indexers{jobSlotIndex: func(obj any) ([]string, error) {
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return nil, nil
		}
		if s := handlers.SlotOfJob(j.Labels, j.Annotations); s != "" {
			return []string{s}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("index Jobs by slot: %w", err)
	}
	return nil
}

// SlotJobs implements handlers.Cluster: the cached lifecycle Jobs of a
// slot, as the adapter's own writes left them (a Job it deleted is gone).
func (c *Cluster) SlotJobs(slot string) []handlers.JobState {
	objs, err := c.jobs.GetIndexer().ByIndex(jobSlotIndex, slot)
	if err != nil || len(objs) == 0 {
		return nil
	}
	out := make([]handlers.JobState, 0, len(objs))
	for _, o := range objs {
		j := o.(*batchv1.Job)
		if st, ok := c.Job(j.Name); ok && j.Namespace == c.namespace {
			out = append(out, st)
		}
	}
	return out
}

// DeleteJob implements handlers.Cluster: the Job and, in the background,
// its pods (the API's default for a Job leaves them orphaned).
func (c *Cluster) DeleteJob(ctx context.Context, name string) error {
	bg := metav1.DeletePropagationBackground
	err := c.client.BatchV1().Jobs(c.namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s/%s: %w", c.namespace, name, err)
	}
	if c.cachedJob(c.namespace, name) != nil {
		c.own.wrote(ownKey("jobs", c.namespace+"/"+name), nil, nil)
	}
	return nil
}
