package suite

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/machines"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dumpOnFailure logs the server's and the machines' log tails if t fails.
func dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Log(server.Tail())
		var b strings.Builder
		for _, e := range model.Events() {
			fmt.Fprintf(&b, "%s %s %s %s\n", e.At.Format("15:04:05.000"), e.Slot, e.What, e.Job)
		}
		t.Logf("machine events:\n%s", b.String())
		jobs, _ := admin.BatchV1().Jobs(namespace).List(context.Background(), metav1.ListOptions{})
		b.Reset()
		for _, j := range jobs.Items {
			fmt.Fprintf(&b, "%s %v %s\n", j.Name, j.Labels, jobPhase(&j))
		}
		t.Logf("jobs:\n%s", b.String())
	})
}

func waitT(t *testing.T, timeout time.Duration, what string, fn func() (bool, string)) {
	t.Helper()
	start := time.Now()
	if err := poll(context.Background(), timeout, what, fn); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%s)", what, time.Since(start).Round(100*time.Millisecond))
}

func increaseSize(t *testing.T, group string, delta int32) {
	t.Helper()
	_, err := provider.NodeGroupIncreaseSize(ctxFor(t, 10*time.Second), &pb.NodeGroupIncreaseSizeRequest{Id: group, Delta: delta})
	if err != nil {
		t.Fatalf("IncreaseSize(%s, %d): %v", group, delta, err)
	}
}

func targetSize(t *testing.T, group string) int32 {
	t.Helper()
	r, err := provider.NodeGroupTargetSize(ctxFor(t, 10*time.Second), &pb.NodeGroupTargetSizeRequest{Id: group})
	if err != nil {
		t.Fatalf("TargetSize(%s): %v", group, err)
	}
	return r.GetTargetSize()
}

func instances(t *testing.T, group string) map[string]*pb.Instance {
	t.Helper()
	r, err := provider.NodeGroupNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupNodesRequest{Id: group})
	if err != nil {
		t.Fatalf("NodeGroupNodes(%s): %v", group, err)
	}
	out := map[string]*pb.Instance{}
	for _, in := range r.GetInstances() {
		out[in.GetId()] = in
	}
	return out
}

func describeInstances(m map[string]*pb.Instance) string {
	var parts []string
	for id, in := range m {
		s := fmt.Sprintf("%s=%s", id, in.GetStatus().GetInstanceState())
		if e := in.GetStatus().GetErrorInfo(); e != nil {
			s += "(" + e.GetErrorCode() + ": " + e.GetErrorMessage() + ")"
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

func providerID(slot string) string { return "homelab://" + slot }

// jobs lists the lifecycle Jobs matching the labels.
func jobs(t *testing.T, labels map[string]string) []batchv1.Job {
	t.Helper()
	var sel []string
	for k, v := range labels {
		sel = append(sel, k+"="+v)
	}
	sort.Strings(sel)
	l, err := admin.BatchV1().Jobs(namespace).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: strings.Join(sel, ",")})
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].CreationTimestamp.Before(&l.Items[j].CreationTimestamp) })
	return l.Items
}

func jobPhase(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return string(c.Type)
		}
	}
	return "Running"
}

func node(t *testing.T, name string) (*corev1.Node, bool) {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Get(ctxFor(t, 10*time.Second), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n, true
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tt := range n.Spec.Taints {
		if tt.Key == key {
			return true
		}
	}
	return false
}

// nodeWatch records what a Node went through (cordoned, deleted), from
// the moment it is called, so that short-lived states are not missed.
type nodeWatch struct {
	cordoned chan struct{}
	deleted  chan struct{}
	stop     func()
}

func watchNode(t *testing.T, name string) *nodeWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		cancel()
		t.Fatalf("watch node %s: %v", name, err)
	}
	nw := &nodeWatch{cordoned: make(chan struct{}), deleted: make(chan struct{}), stop: func() { cancel(); w.Stop() }}
	t.Cleanup(nw.stop)
	go func() {
		var c, d bool
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			if !c && n.Spec.Unschedulable {
				c = true
				close(nw.cordoned)
			}
			if !d && ev.Type == watch.Deleted {
				d = true
				close(nw.deleted)
			}
		}
	}()
	return nw
}

func waitChan(t *testing.T, ch <-chan struct{}, timeout time.Duration, what string) {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		t.Logf("%s (%s)", what, time.Since(start).Round(100*time.Millisecond))
	case <-time.After(timeout):
		t.Fatalf("%s: not within %s", what, timeout)
	}
}

func waitMachine(t *testing.T, slot, what string, from int, timeout time.Duration) machines.Event {
	t.Helper()
	ev, err := model.WaitEvent(ctxFor(t, timeout), slot, what, from)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// applyDynamic creates o through the dynamic client (server-side dry run
// when dryRun), with strict field validation.
func applyDynamic(ctx context.Context, o *unstructured.Unstructured, dryRun bool) error {
	ri, err := dynamicResource(o)
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{FieldValidation: "Strict", FieldManager: "claimstream-e2e"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Create(ctx, o, opts)
	return err
}

// updateDynamic replaces the object the API server holds under o's name
// by o, as `helm upgrade` does with a changed object, with strict field
// validation.
func updateDynamic(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := dynamicResource(o)
	if err != nil {
		return err
	}
	cur, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	o = o.DeepCopy()
	o.SetResourceVersion(cur.GetResourceVersion())
	_, err = ri.Update(ctx, o, metav1.UpdateOptions{FieldValidation: "Strict", FieldManager: "claimstream-e2e"})
	return err
}

// dynamicResource is the dynamic client of o's kind (in o's namespace when
// the kind is namespaced), found through discovery.
func dynamicResource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(adminCfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(adminCfg)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == "namespace" {
		return dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return dyn.Resource(m.Resource), nil
}

func adminCfgDiscovery() *discovery.DiscoveryClient {
	return discovery.NewDiscoveryClientForConfigOrDie(adminCfg)
}
