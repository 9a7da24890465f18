package suite

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/chartrender"
	"github.com/claimstream/claimstream/deploy/e2e/machines"
	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// The server of this file runs as the chart renders it with a job
// namespace apart from the release's: the chart's ServiceAccount and RBAC
// applied for real in kcRelease and kcJobs, serve with the StatefulSet's
// flags and environment (its Pod cannot run under kwok, which runs no
// container). Its groups, slots and namespaces are its own: the suite's
// shared server knows none of them.
const (
	kcRelease     = "kc-release"
	kcJobs        = "kc-jobs"
	kcReleaseName = "kc"
	kcBurst       = 100
	// kcTTLBoot is how long after its startup Job a kcttl machine
	// registers: well after the TTL controller deleted the Job.
	kcTTLBoot = 8 * time.Second
)

func kcPool() string {
	var b strings.Builder
	b.WriteString(`
groups:
  - name: kc
    maxSize: 1
    readinessTaints: &rt [{key: e2e.claimstream.dev/not-ready, effect: NoExecute}]
    lifecycle: {startupJobTimeout: 30s, registrationWait: 60s, readinessGate: 30s}
    template: &tmpl
      capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  - name: kcttl
    maxSize: 1
    readinessTaints: *rt
    lifecycle: {startupJobTimeout: 30s, registrationWait: 90s, readinessGate: 30s}
    template: *tmpl
  - name: kcburst
    maxSize: 100
    lifecycle: {startupJobTimeout: 5m, registrationWait: 30m, readinessGate: 30m}
    template: *tmpl

slots:
  - name: kc-1
    group: kc
    startup: &power
      podSpec:
        restartPolicy: Never
        nodeSelector: {e2e.claimstream.dev/worker: "true"}
        tolerations: [{key: e2e.claimstream.dev/worker, operator: Exists, effect: NoSchedule}]
        containers:
          - name: power
            image: e2e.invalid/power:never-pulled
            command: ["/bin/true"]
    shutdown: *power
  - name: kcttl-1
    group: kcttl
    startup:
      podSpec:
        restartPolicy: Never
        nodeSelector: {e2e.claimstream.dev/worker: "true"}
        tolerations: [{key: e2e.claimstream.dev/worker, operator: Exists, effect: NoSchedule}]
        containers:
          - name: power
            image: e2e.invalid/power:never-pulled
            command: ["/bin/true"]
      ttlSecondsAfterFinished: 0
    shutdown: *power
`)
	for i := 1; i <= kcBurst; i++ {
		fmt.Fprintf(&b, "  - {name: kcburst-%d, group: kcburst, startup: *power, shutdown: *power}\n", i)
	}
	return b.String()
}

// kcServer is the file's server, started by the first test that needs it.
type kcServerT struct {
	proc                     *testenv.Process
	provider                 pb.CloudProviderClient
	model                    *machines.Model
	metricsAddr, leaseName   string
	releaseNS, jobNS, saUser string
}

var (
	kcOnce sync.Once
	kc     *kcServerT
	kcErr  error
)

func kcServer(t *testing.T) *kcServerT {
	t.Helper()
	kcOnce.Do(func() { kc, kcErr = startKCServer(context.Background()) })
	if kcErr != nil {
		t.Fatalf("the job-namespace server: %v", kcErr)
	}
	return kc
}

func (s *kcServerT) tail() string {
	return "\n--- " + s.proc.Name + " log tail ---\n" + testenv.TailFile(s.proc.LogPath, 6000)
}

func startKCServer(ctx context.Context) (*kcServerT, error) {
	for _, ns := range []string{kcRelease, kcJobs} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	objs, err := chartrender.Render(kcReleaseName, kcRelease, map[string]any{"jobNamespace": kcJobs})
	if err != nil {
		return nil, err
	}
	s := &kcServerT{releaseNS: kcRelease, jobNS: kcJobs}
	var saName string
	var args []string
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			if o.GetLabels()["app.kubernetes.io/component"] == "" {
				saName = o.GetName()
			}
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		case "StatefulSet":
			args = statefulSetArgs(o)
			continue
		default:
			continue
		}
		if err := createTyped(ctx, o); err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		onTeardown(func() { _ = deleteDynamic(context.Background(), o) })
	}
	if saName == "" || args == nil {
		return nil, fmt.Errorf("the chart renders no ServiceAccount or StatefulSet")
	}
	// The chart's flags that say where things live and how fast to talk.
	var flags []string
	for _, a := range args {
		for _, keep := range []string{"--namespace=", "--release-namespace=", "--lease-name=", "--leader-elect=", "--kube-api-qps=", "--kube-api-burst="} {
			if strings.HasPrefix(a, keep) {
				flags = append(flags, a)
			}
		}
		if v, ok := strings.CutPrefix(a, "--lease-name="); ok {
			s.leaseName = v
		}
	}
	if len(flags) != 6 {
		return nil, fmt.Errorf("the StatefulSet's args %v lack some of the namespace, lease and rate flags (found %v)", args, flags)
	}
	// The startup Job's pods need the job namespace's default ServiceAccount.
	if err := poll(ctx, 60*time.Second, "namespace "+kcJobs+" has its default ServiceAccount", func() (bool, string) {
		_, err := admin.CoreV1().ServiceAccounts(kcJobs).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return nil, err
	}
	exp := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(kcRelease).CreateToken(ctx, saName, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	s.saUser = "system:serviceaccount:" + kcRelease + ":" + saName
	dir := filepath.Join(env.Dir, "kc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kcfg := filepath.Join(dir, "sa.kubeconfig")
	if err := os.WriteFile(kcfg, []byte(testenv.KubeconfigToken(env.Host, env.CAPEM, saName, tr.Status.Token)), 0o600); err != nil {
		return nil, err
	}
	pool := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(pool, []byte(kcPool()), 0o644); err != nil {
		return nil, err
	}

	slots := []machines.Slot{
		{Name: "kc-1", ReadinessTaints: []corev1.Taint{{Key: readyTaint, Effect: corev1.TaintEffectNoExecute}}},
		{Name: "kcttl-1", ReadinessTaints: []corev1.Taint{{Key: readyTaint, Effect: corev1.TaintEffectNoExecute}}},
	}
	for i := 1; i <= kcBurst; i++ {
		slots = append(slots, machines.Slot{Name: fmt.Sprintf("kcburst-%d", i)})
	}
	logf, err := os.Create(filepath.Join(env.Dir, "logs", "kc-machines.log"))
	if err != nil {
		return nil, err
	}
	onTeardown(func() { logf.Close() })
	s.model = machines.New(admin, kcJobs, slots, machines.Knobs{BootDelay: time.Second, ReadyDelay: 2 * time.Second}, slog.New(slog.NewTextHandler(logf, nil)))
	s.model.SetKnobs("kcttl-1", machines.Knobs{BootDelay: kcTTLBoot, ReadyDelay: time.Second})
	for i := 1; i <= kcBurst; i++ {
		// Only the Jobs are measured: no hundred Nodes.
		s.model.SetKnobs(fmt.Sprintf("kcburst-%d", i), machines.Knobs{NeverBoots: true})
	}
	mctx, mcancel := context.WithCancel(ctx)
	mdone := make(chan struct{})
	go func() { defer close(mdone); _ = s.model.Run(mctx) }()
	onTeardown(func() { mcancel(); <-mdone })

	ports, err := testenv.FreePorts(3)
	if err != nil {
		return nil, err
	}
	grpcAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.metricsAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
	full := append([]string{"serve",
		"--config", pool, "--config-poll", "1h",
		"--kubeconfig", kcfg,
		"--data-dir", filepath.Join(dir, "data"),
		"--grpc-address", grpcAddr, "--plaintext",
		"--api-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--metrics-address", s.metricsAddr,
		"--log-level=debug",
	}, flags...)
	// The chart's downward API gives POD_NAMESPACE; with no Pod to label,
	// no POD_NAME.
	var penv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POD_NAME=") && !strings.HasPrefix(kv, "POD_NAMESPACE=") {
			penv = append(penv, kv)
		}
	}
	penv = append(penv, "POD_NAMESPACE="+kcRelease)
	s.proc, err = testenv.StartProcess("claimstream-kc", server.Bin, full, filepath.Join(env.Dir, "logs"), penv)
	if err != nil {
		return nil, err
	}
	allPids = append(allPids, s.proc.Pid())
	onTeardown(func() { s.proc.Stop(10 * time.Second) })
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	onTeardown(func() { conn.Close() })
	s.provider = pb.NewCloudProviderClient(conn)
	err = poll(ctx, 90*time.Second, "the job-namespace server leads and lists its groups", func() (bool, string) {
		if done, err := s.proc.Exited(); done {
			return false, fmt.Sprintf("exited: %v%s", err, s.tail())
		}
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		r, err := s.provider.NodeGroups(c, &pb.NodeGroupsRequest{})
		if err != nil {
			return false, err.Error()
		}
		return len(r.GetNodeGroups()) == 3, fmt.Sprintf("%d groups", len(r.GetNodeGroups()))
	})
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, s.tail())
	}
	return s, nil
}

// statefulSetArgs are the claimstream container's args of a rendered StatefulSet.
func statefulSetArgs(o *unstructured.Unstructured) []string {
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["name"] != "claimstream" {
			continue
		}
		var out []string
		raw, _ := m["args"].([]any)
		for _, a := range raw {
			out = append(out, fmt.Sprint(a))
		}
		return out
	}
	return nil
}

func (s *kcServerT) instances(t *testing.T, group string) map[string]*pb.Instance {
	t.Helper()
	r, err := s.provider.NodeGroupNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupNodesRequest{Id: group})
	if err != nil {
		t.Fatalf("NodeGroupNodes(%s): %v", group, err)
	}
	out := map[string]*pb.Instance{}
	for _, in := range r.GetInstances() {
		out[in.GetId()] = in
	}
	return out
}

func (s *kcServerT) running(t *testing.T, group, slot string) (bool, string) {
	in := s.instances(t, group)
	i := in[providerID(slot)]
	return i != nil && i.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning, describeInstances(in)
}

func (s *kcServerT) increase(t *testing.T, group string, delta int32) time.Time {
	t.Helper()
	if _, err := s.provider.NodeGroupIncreaseSize(ctxFor(t, 10*time.Second), &pb.NodeGroupIncreaseSizeRequest{Id: group, Delta: delta}); err != nil {
		t.Fatalf("IncreaseSize(%s, %d): %v%s", group, delta, err, s.tail())
	}
	return time.Now()
}

// With the chart's jobNamespace apart from its release namespace, serve
// (as the chart's ServiceAccount, with the chart's flags) takes the Lease
// in the release namespace, writes its status ConfigMap there, and scales
// up and down with its Jobs in the job namespace.
func TestChartJobNamespaceLeadsAndScales(t *testing.T) {
	s := kcServer(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.tail())
		}
	})
	ctx := ctxFor(t, 3*time.Minute)
	waitT(t, 30*time.Second, "the Lease in the release namespace names a holder", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(kcRelease).Get(ctx, s.leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "no holder"
	})
	if _, err := admin.CoordinationV1().Leases(kcJobs).Get(ctx, s.leaseName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Lease in the job namespace: %v", err)
	}
	w := watchNode(t, "kc-1")
	s.increase(t, "kc", 1)
	waitT(t, 90*time.Second, "kc-1 booted through a Job in "+kcJobs+" and running", func() (bool, string) {
		return s.running(t, "kc", "kc-1")
	})
	js, err := admin.BatchV1().Jobs(kcJobs).List(ctx, metav1.ListOptions{LabelSelector: lOp + "=startup," + lSlot + "=kc-1"})
	if err != nil || len(js.Items) != 1 {
		t.Fatalf("startup Jobs of kc-1 in %s: %v %v", kcJobs, js, err)
	}
	waitT(t, 30*time.Second, "the status ConfigMap in the release namespace", func() (bool, string) {
		_, err := admin.CoreV1().ConfigMaps(kcRelease).Get(ctx, "claimstream-status", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if _, err := s.provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{
		Id: "kc", Nodes: []*pb.ExternalGrpcNode{{ProviderID: providerID("kc-1"), Name: "kc-1"}},
	}); err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	waitChan(t, w.cordoned, 30*time.Second, "kc-1 cordoned")
	waitChan(t, w.deleted, 90*time.Second, "kc-1 shut down by a Job in "+kcJobs+" and its Node deleted")
	waitT(t, 30*time.Second, "group kc back to no instance", func() (bool, string) {
		in := s.instances(t, "kc")
		return len(in) == 0, describeInstances(in)
	})
}

// A startup Job of a pool with ttlSecondsAfterFinished 0 carries no TTL
// of its own (claimstream deletes it once its outcome is in the log and
// its claim left booting); deleted by hand as soon as it finished, long
// before its machine's Node registers, the boot goes on with that one
// Job. The creates are counted by the API server (apiserver_request_total,
// POST jobs answered 201), less those the watch saw in other namespaces.
func TestTTLZeroStartupJobCreatedOncePerAttempt(t *testing.T) {
	s := kcServer(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.tail())
		}
	})
	ctx := ctxFor(t, 3*time.Minute)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	jw, err := watchJobsFromNow(wctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	elsewhere, deleted, ownTTL := 0, false, false
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range jw.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			ours := j.Namespace == kcJobs && machines.SlotOf(j) == "kcttl-1"
			mu.Lock()
			switch {
			case ev.Type == watch.Added && j.Namespace != kcJobs:
				elsewhere++
			case ev.Type == watch.Added && ours && j.Spec.TTLSecondsAfterFinished != nil:
				ownTTL = true
			case ev.Type == watch.Modified && ours && jobFinished(j):
				bg := metav1.DeletePropagationBackground
				_ = admin.BatchV1().Jobs(j.Namespace).Delete(wctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
			case ev.Type == watch.Deleted && ours:
				deleted = true
			}
			mu.Unlock()
		}
	}()
	before := jobCreates(t)
	s.increase(t, "kcttl", 1)
	waitT(t, 60*time.Second, "kcttl-1's finished startup Job deleted by hand", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return deleted, "not deleted"
	})
	if n, ok := node(t, "kcttl-1"); ok {
		t.Fatalf("the Node %s registered before its Job was deleted: the case is not made", n.Name)
	}
	waitT(t, 90*time.Second, "kcttl-1 registered and running", func() (bool, string) {
		return s.running(t, "kcttl", "kcttl-1")
	})
	after := jobCreates(t)
	stop()
	<-watched
	mu.Lock()
	other, own := elsewhere, ownTTL
	mu.Unlock()
	if own {
		t.Error("the startup Job carries a ttlSecondsAfterFinished of its own: the pool's is claimstream's to apply")
	}
	attempts := 0
	for _, in := range s.instances(t, "kcttl") {
		if in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning {
			attempts++
		}
	}
	if got := after - before - other; got != attempts || attempts != 1 {
		t.Errorf("%d Jobs created in %s for %d running attempt(s) (API server: %d creates, %d in other namespaces), want exactly 1", got, kcJobs, attempts, after-before, other)
	}
}

// jobCreates is the API server's count of Jobs created (POST jobs, 201).
func jobCreates(t *testing.T) int {
	t.Helper()
	b, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("the API server's /metrics: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="jobs"`) ||
			!strings.Contains(line, `verb="POST"`) || !strings.Contains(line, `code="201"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("apiserver_request_total line %q: %v", line, err)
		}
		n += int(v)
	}
	return n
}

// IncreaseSize(+100) on a group of 100 slots: the 100 startup Jobs are on
// the API server within kcBurstBound of the acknowledgement (the client's
// rate limit is the chart's). The time is logged for docs/benchmarks.md,
// and serve's /metrics shows the requests' waits for its rate limiter.
func TestIncreaseSizeHundredJobsWithinBound(t *testing.T) {
	const kcBurstBound = 5 * time.Second
	s := kcServer(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.tail())
		}
	})
	ctx := ctxFor(t, 2*time.Minute)
	jw, err := watchJobsFromNow(ctx, kcJobs, lOp+"=startup")
	if err != nil {
		t.Fatal(err)
	}
	defer jw.Stop()
	acked := s.increase(t, "kcburst", kcBurst)
	seen := map[string]bool{}
	var last time.Time
	deadline := time.After(30 * time.Second)
	for len(seen) < kcBurst {
		select {
		case ev, ok := <-jw.ResultChan():
			if !ok {
				t.Fatalf("the Job watch ended after %d Jobs", len(seen))
			}
			j, ok := ev.Object.(*batchv1.Job)
			if ok && ev.Type == watch.Added && strings.HasPrefix(machines.SlotOf(j), "kcburst-") && !seen[j.Name] {
				seen[j.Name] = true
				last = time.Now()
			}
		case <-deadline:
			t.Fatalf("%d of %d startup Jobs within 30s of the acknowledgement", len(seen), kcBurst)
		}
	}
	took := last.Sub(acked)
	t.Logf("%d startup Jobs on the API server %s after IncreaseSize(+%d) was acknowledged", kcBurst, took.Round(time.Millisecond), kcBurst)
	if took > kcBurstBound {
		t.Errorf("the %d startup Jobs took %s, want at most %s", kcBurst, took, kcBurstBound)
	}
	resp, err := http.Get("http://" + s.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "claimstream_kube_client_rate_limiter_seconds_count{") && strings.Contains(line, `verb="POST"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("serve's /metrics has no claimstream_kube_client_rate_limiter_seconds_count for POST")
	}
	// The Job controller works through the 100 Jobs and their pods at its
	// own rate limit: the next test's Jobs would wait behind them.
	waitT(t, 2*time.Minute, "the controllers finished the 100 Jobs", func() (bool, string) {
		l, err := admin.BatchV1().Jobs(kcJobs).List(ctx, metav1.ListOptions{LabelSelector: lOp + "=startup"})
		if err != nil {
			return false, err.Error()
		}
		done := 0
		for i := range l.Items {
			if strings.HasPrefix(machines.SlotOf(&l.Items[i]), "kcburst-") && jobPhase(&l.Items[i]) == "Complete" {
				done++
			}
		}
		return done == kcBurst, fmt.Sprintf("%d of %d complete", done, kcBurst)
	})
}

// watchJobsFromNow watches the Jobs of ns (all: "") from now on: the
// Jobs there already are not told as added.
func watchJobsFromNow(ctx context.Context, ns, selector string) (watch.Interface, error) {
	l, err := admin.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
	if err != nil {
		return nil, err
	}
	return admin.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: l.ResourceVersion})
}

// jobFinished: the Job completed or failed.
func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
