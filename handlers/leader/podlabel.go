package leader

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// PodLabel marks the leader's Pod: the chart's provider and API Service
// selects claimstream.dev/leader=true, so cluster-autoscaler and the CLI
// reach the leader only, never a follower that answers TargetSize from
// views of its own.
const PodLabel = "claimstream.dev/leader"

// releaseLabel groups the Pods of one Helm release.
const releaseLabel = "app.kubernetes.io/instance"

// LabelLeaderPod labels the Pod namespace/name PodLabel=true and removes
// the label from every other Pod of its release that has it (a previous
// leader). The leader calls it after its LeaderElected append.
func LabelLeaderPod(ctx context.Context, cs interface {
	CoreV1() corev1client.CoreV1Interface
}, namespace, name string,
) error {
	pods := cs.CoreV1().Pods(namespace)
	self, err := pods.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+PodLabel+`":"true"}}}`), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("label the leader's pod %s/%s %s=true: %w", namespace, name, PodLabel, err)
	}
	sel := labels.Set{PodLabel: "true"}
	if rel := self.Labels[releaseLabel]; rel != "" {
		sel[releaseLabel] = rel
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Errorf("list the pods labelled %s: %w", PodLabel, err)
	}
	for _, p := range list.Items {
		if p.Name == name {
			continue
		}
		if _, err := pods.Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+PodLabel+`":null}}}`), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("remove %s from the former leader's pod %s/%s: %w", PodLabel, namespace, p.Name, err)
		}
	}
	return nil
}
