package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/reference"

	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/scale"
)

// kubeletNode is a Node as a kubelet and the control plane leave it: the
// field managers' managedFields, forty images, capacity, node info, every
// condition with its prose, and the labels, taints and addresses
// claimstream reads.
func kubeletNode(name string) *corev1.Node {
	ready := metav1.NewTime(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("uid-" + name), ResourceVersion: "4711", Generation: 3,
			CreationTimestamp: metav1.NewTime(ready.Add(-time.Minute)),
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				handlers.LabelGroup: "gpu", "node.kubernetes.io/instance-type": "homelab",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
				lastApplied: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + name + `"}}`,
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "homelab://" + name, PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}, Unschedulable: true,
			Taints: []corev1.Taint{{Key: "claimstream.dev/not-ready", Effect: corev1.TaintEffectNoExecute}, {Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Capacity:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")},
			Allocatable:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7800m"), corev1.ResourceMemory: resource.MustParse("31Gi")},
			Phase:           corev1.NodeRunning,
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: "10.0.0.7"}},
			NodeInfo:        corev1.NodeSystemInfo{MachineID: "0f3c", KernelVersion: "6.8.0-51-generic", OSImage: "Ubuntu 24.04.1 LTS", ContainerRuntimeVersion: "containerd://1.7.24", KubeletVersion: "v1.35.4"},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		},
	}
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		st := corev1.ConditionFalse
		if c == corev1.NodeReady {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: c, Status: st, LastHeartbeatTime: ready, LastTransitionTime: ready,
			Reason: "Kubelet" + string(c), Message: "kubelet reports " + string(c) + " as " + string(st),
		})
	}
	for i := range 40 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("registry.example.org/team/app-%d@sha256:%064x", i, i),
				fmt.Sprintf("registry.example.org/team/app-%d:v1.%d.0", i, i),
			},
			SizeBytes: int64(100_000_000 + i),
		})
	}
	for _, m := range []string{"kubelet", "kube-controller-manager", "kubectl-label"} {
		n.ManagedFields = append(n.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &ready, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{}},"f:labels":{"f:kubernetes.io/hostname":{}}},"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:kernelVersion":{}}}}`)},
		})
	}
	return n
}

// A trimmed Node reads the same everywhere the code reads one: the
// reactors' view, the object watchers, the group index, the taints a
// patch rewrites, the reference an Event names, and the resourceVersion
// Settle waits for; and it is a fraction of the kubelet's Node.
func TestTrimmedNodeKeepsWhatTheCodeReads(t *testing.T) {
	n := kubeletNode("gpu-1")
	orig := n.DeepCopy()
	got, err := trimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	tn := got.(*corev1.Node)
	if !reflect.DeepEqual(n, orig) {
		t.Error("trimNode changed the informer's Node")
	}
	if a, b := NodeViewOf(orig), NodeViewOf(tn); !reflect.DeepEqual(a, b) {
		t.Errorf("NodeViewOf:\n trimmed %+v\n    full %+v", b, a)
	}
	if !reflect.DeepEqual(tn.Spec, orig.Spec) {
		t.Errorf("spec %+v, want %+v (a taints patch rewrites the whole list)", tn.Spec, orig.Spec)
	}
	if tn.Name != orig.Name || tn.UID != orig.UID || tn.ResourceVersion != orig.ResourceVersion || !tn.CreationTimestamp.Equal(&orig.CreationTimestamp) {
		t.Errorf("metadata %+v", tn.ObjectMeta)
	}
	if !reflect.DeepEqual(tn.Labels, orig.Labels) || tn.Labels[handlers.LabelGroup] != "gpu" {
		t.Errorf("labels %v, want %v", tn.Labels, orig.Labels)
	}
	if _, ok := tn.Annotations["node.alpha.kubernetes.io/ttl"]; !ok {
		t.Errorf("annotations %v lost the Node's own", tn.Annotations)
	}
	if _, ok := tn.Annotations[lastApplied]; ok || len(tn.ManagedFields) > 0 || len(tn.Status.Images) > 0 {
		t.Errorf("kept what no one reads: annotations %v, %d managedFields, %d images", tn.Annotations, len(tn.ManagedFields), len(tn.Status.Images))
	}
	if _, ok := orig.Annotations[lastApplied]; !ok {
		t.Error("trimNode dropped an annotation from the informer's Node")
	}
	ra, err := reference.GetReference(kscheme.Scheme, orig)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := reference.GetReference(kscheme.Scheme, tn)
	if err != nil {
		t.Fatal(err)
	}
	if *ra != *rb {
		t.Errorf("Event reference %+v, want %+v", rb, ra)
	}
	if m, _ := meta.Accessor(tn); m.GetResourceVersion() != "4711" {
		t.Errorf("resourceVersion %q", m.GetResourceVersion())
	}
	full, _ := json.Marshal(orig)
	small, _ := json.Marshal(tn)
	if len(small)*4 > len(full) {
		t.Errorf("trimmed Node is %d bytes of %d: more than a quarter", len(small), len(full))
	}
}

// The Node cache over the fake holds the trimmed Node, and reads as the
// full one through the Cluster.
func TestClusterCachesTrimmedNodes(t *testing.T) {
	f := NewFake()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n := kubeletNode("gpu-1")
	if _, err := f.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := New(f, Options{Namespace: "ns"})
	c.Start(ctx)
	defer func() { cancel(); c.Shutdown() }()
	if !c.WaitForSync(ctx) {
		t.Fatal("not synced")
	}
	cached, ok := c.node("gpu-1")
	if !ok {
		t.Fatal("no Node in the cache")
	}
	if len(cached.Status.Images) > 0 || len(cached.ManagedFields) > 0 {
		t.Errorf("cache holds %d images, %d managedFields", len(cached.Status.Images), len(cached.ManagedFields))
	}
	want := NodeViewOf(n)
	if got, _ := c.Node("gpu-1"); !reflect.DeepEqual(got.Name, want.Name) || got.ProviderID != want.ProviderID || got.Ready != want.Ready || got.Address != want.Address || len(got.Taints) != 2 {
		t.Errorf("Node %+v, want %+v", got, want)
	}
	if l := c.NodesLabelled("gpu"); len(l) != 1 {
		t.Errorf("NodesLabelled(gpu) = %v", l)
	}
}

// A trimmed pod keeps what the built-in scaler and a drain read of it.
func TestTrimmedPodKeepsWhatTheScalerReads(t *testing.T) {
	ctrl := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "u1", ResourceVersion: "9",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{scale.MirrorAnnotation: "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "d1", Controller: &ctrl}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}},
		},
		Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "x", ImageID: "sha256:1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	orig := p.DeepCopy()
	got, _ := trimPod(p)
	tp := got.(*corev1.Pod)
	if !reflect.DeepEqual(p, orig) {
		t.Error("trimPod changed the informer's pod")
	}
	if !reflect.DeepEqual(PodViewOf(tp), PodViewOf(orig)) || !reflect.DeepEqual(tp.Spec, orig.Spec) || tp.Status.Phase != orig.Status.Phase ||
		!reflect.DeepEqual(tp.OwnerReferences, orig.OwnerReferences) || !reflect.DeepEqual(tp.Labels, orig.Labels) || scale.DaemonSetPod(tp) != scale.DaemonSetPod(orig) {
		t.Errorf("trimmed pod %+v, want what the scaler reads of %+v", tp, orig)
	}
	if len(tp.ManagedFields) > 0 || len(tp.Status.ContainerStatuses) > 0 {
		t.Errorf("kept %d managedFields, %d container statuses", len(tp.ManagedFields), len(tp.Status.ContainerStatuses))
	}
}
