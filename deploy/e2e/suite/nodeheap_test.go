package suite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// nodeHeapEnv turns on TestServeHeapWithManyNodes: it creates thousands of
// Nodes (about a minute) and is out of the default suite.
const nodeHeapEnv = "CLAIMSTREAM_E2E_NODE_HEAP"

const heapPool = `
groups:
  - name: heap
    template: {capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
slots:
  - name: heap-slot-1
    group: heap
    startup: &power
      podSpec:
        containers: [{name: power, image: e2e.invalid/power:never-pulled}]
    shutdown: *power
`

// TestServeHeapWithManyNodes measures serve's live heap (after a
// collection) once its Node cache holds $CLAIMSTREAM_E2E_NODE_HEAP Nodes
// (5000 for "1") written as kubelets write them: forty images, node info,
// capacity, four conditions, and the managedFields of the create and of
// the status update. Run it with the binary to compare in
// CLAIMSTREAM_E2E_BINARY (docs/benchmarks.md).
func TestServeHeapWithManyNodes(t *testing.T) {
	v := os.Getenv(nodeHeapEnv)
	if v == "" {
		t.Skipf("set %s=1 (5000 Nodes) or a number of Nodes", nodeHeapEnv)
	}
	count := 5000
	if v != "1" {
		var err error
		if count, err = strconv.Atoi(v); err != nil || count < 1 {
			t.Fatalf("%s=%q: want 1 or a number of Nodes", nodeHeapEnv, v)
		}
	}
	ctx := ctxFor(t, 10*time.Minute)
	cfg := *adminCfg
	cfg.QPS, cfg.Burst = 2000, 2000
	fast, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	const sel = "e2e.claimstream.dev/heap=true"
	t.Cleanup(func() {
		_ = fast.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
	})
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, count)
	names := make(chan string)
	for range 16 {
		wg.Go(func() {
			for name := range names {
				if err := createKubeletNode(ctx, fast, name); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range count {
		names <- fmt.Sprintf("heap-%05d", i)
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d kubelet-shaped Nodes created in %s", count, time.Since(start).Round(time.Second))

	dir := filepath.Join(env.Dir, "heap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pool := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(pool, []byte(heapPool), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", ports[0])
	args := []string{"serve", "--config", pool, "--kubeconfig", env.Kubeconfig, "--namespace", "heap",
		"--data-dir", filepath.Join(dir, "data"), "--leader-elect=false", "--grpc-address=", "--api-address=",
		"--metrics-address", metrics, "--pprof", "--log-level=info"}
	p, err := testenv.StartProcess("claimstream-heap", server.Bin, args, filepath.Join(env.Dir, "logs"), nil)
	if err != nil {
		t.Fatal(err)
	}
	allPids = append(allPids, p.Pid())
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	waitT(t, 2*time.Minute, "serve's Node cache synced", func() (bool, string) {
		if done, err := p.Exited(); done {
			return false, fmt.Sprintf("exited: %v\n%s", err, testenv.TailFile(p.LogPath, 3000))
		}
		b, _ := os.ReadFile(p.LogPath)
		return strings.Contains(string(b), "reactors running"), "not yet"
	})
	// Two collections: the start-up's garbage and the informers' list
	// buffers are gone before the heap is read.
	var live int64
	for range 2 {
		if live, err = liveHeap(ctx, metrics); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("serve's live heap with %d Nodes cached: %.1f MiB (%s)", count, float64(live)/(1<<20), server.Bin)
}

// liveHeap forces a collection in serve and reads its HeapAlloc.
func liveHeap(ctx context.Context, addr string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in the heap profile (%d bytes)", len(b))
}

// createKubeletNode creates a Node and writes its status as a kubelet
// does (its own field manager: managedFields of both writers).
func createKubeletNode(ctx context.Context, c kubernetes.Interface, name string) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"e2e.claimstream.dev/heap": "true", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.2xlarge",
				"topology.kubernetes.io/zone": "eu-west-1a", "topology.kubernetes.io/region": "eu-west-1",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-" + name, PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}},
	}
	created, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{FieldManager: "kubelet"})
	if err != nil {
		return fmt.Errorf("create Node %s: %w", name, err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	st := corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalDNS, Address: name + ".eu-west-1.compute.internal"}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID: "ec2" + name, SystemUUID: "ec2" + name, BootID: "boot-" + name, KernelVersion: "6.1.112-124.190.amzn2023.x86_64",
			OSImage: "Amazon Linux 2023.6.20241121", ContainerRuntimeVersion: "containerd://1.7.23", KubeletVersion: "v1.35.4",
			KubeProxyVersion: "v1.35.4", OperatingSystem: "linux", Architecture: "amd64",
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
	}
	for _, ct := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		s, reason, msg := corev1.ConditionFalse, "KubeletHasSufficient"+string(ct), "kubelet has sufficient "+string(ct)
		if ct == corev1.NodeReady {
			s, reason, msg = corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"
		}
		st.Conditions = append(st.Conditions, corev1.NodeCondition{Type: ct, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now})
	}
	for i := range 40 {
		st.Images = append(st.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/service-%02d@sha256:%064x", i, i*7919+1),
				fmt.Sprintf("123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/service-%02d:v1.%d.3", i, i),
			},
			SizeBytes: int64(50_000_000 + i*1_000_003),
		})
	}
	// The node controllers may write the new Node first: write over
	// their version, as a kubelet does.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		created.Status = st
		_, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "kubelet"})
		if apierrors.IsConflict(err) {
			if cur, gerr := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); gerr == nil {
				created = cur
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("status of Node %s: %w", name, err)
	}
	return nil
}
