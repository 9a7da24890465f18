package leader

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func pod(name, release string, leader bool) *corev1.Pod {
	l := map[string]string{releaseLabel: release}
	if leader {
		l[PodLabel] = "true"
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "claimstream", Name: name, Labels: l}}
}

// The new leader's Pod gets the label the Service selects; the former
// leader's loses it; another release's leader keeps its own.
func TestLabelLeaderPodMovesTheLabel(t *testing.T) {
	cs := fake.NewClientset(pod("claimstream-0", "cs", true), pod("claimstream-1", "cs", false), pod("claimstream-2", "cs", false), pod("other-0", "other", true))
	ctx := context.Background()
	if err := LabelLeaderPod(ctx, cs, "claimstream", "claimstream-1"); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"claimstream-0": false, "claimstream-1": true, "claimstream-2": false, "other-0": true}
	for name, leader := range want {
		p, err := cs.CoreV1().Pods("claimstream").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Labels[PodLabel] == "true"; got != leader {
			t.Errorf("%s labelled leader: %v, want %v (labels %v)", name, got, leader, p.Labels)
		}
		if p.Labels[releaseLabel] == "" {
			t.Errorf("%s lost its other labels: %v", name, p.Labels)
		}
	}
}
