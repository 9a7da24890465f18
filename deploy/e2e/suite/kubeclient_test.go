package suite

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/chartrender"
	"github.com/claimstream/claimstream/deploy/e2e/machines"
	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// The server of this file is the chart installed for real with a job
// namespace apart from the release's: every rendered object created on the
// API server in kcRelease and kcJobs, and serve run with the args and
// environment of the StatefulSet read back from it, its volumes as local
// directories (its Pod cannot run under kwok, which runs no container).
// Its groups, slots and namespaces are its own: the suite's shared server
// knows none of them.
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
	chart                    *installedChart
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
	var poolValues map[string]any
	if err := yaml.Unmarshal([]byte(kcPool()), &poolValues); err != nil {
		return nil, fmt.Errorf("the pool: %w", err)
	}
	objs, err := chartrender.Render(kcReleaseName, kcRelease, map[string]any{
		"jobNamespace": kcJobs,
		"logLevel":     "debug",
		"pool":         map[string]any{"config": poolValues},
	})
	if err != nil {
		return nil, err
	}
	// The startup Job's pods need the job namespace's default ServiceAccount.
	if err := poll(ctx, 60*time.Second, "namespace "+kcJobs+" has its default ServiceAccount", func() (bool, string) {
		_, err := admin.CoreV1().ServiceAccounts(kcJobs).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return nil, err
	}
	dir := filepath.Join(env.Dir, "kc")
	ic, err := installChart(ctx, objs, dir)
	if err != nil {
		return nil, err
	}
	s := &kcServerT{releaseNS: kcRelease, jobNS: kcJobs, chart: ic}
	for _, a := range ic.Args {
		if v, ok := strings.CutPrefix(a, "--lease-name="); ok {
			s.leaseName = v
		}
	}
	grpcAddr, metricsAddr := ic.Listen["--grpc-address"], ic.Listen["--metrics-address"]
	if s.leaseName == "" || grpcAddr == "" || metricsAddr == "" || ic.ServiceAccount == "" {
		return nil, fmt.Errorf("the StatefulSet's container lacks a lease name, gRPC or metrics listener or ServiceAccount: %v", ic.Args)
	}
	s.metricsAddr = metricsAddr
	// In a Pod the ServiceAccount's token comes in-cluster; here a
	// kubeconfig carries a token of the same ServiceAccount.
	exp := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(kcRelease).CreateToken(ctx, ic.ServiceAccount, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	s.saUser = "system:serviceaccount:" + kcRelease + ":" + ic.ServiceAccount
	kcfg := filepath.Join(dir, "sa.kubeconfig")
	if err := os.WriteFile(kcfg, []byte(testenv.KubeconfigToken(env.Host, env.CAPEM, ic.ServiceAccount, tr.Status.Token)), 0o600); err != nil {
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

	// The container's args and environment, with of the host's only PATH
	// and the tmp volume as TMPDIR and HOME.
	args := append(slices.Clone(ic.Args), "--kubeconfig="+kcfg)
	if len(args) == 0 || args[0] != "serve" {
		return nil, fmt.Errorf("the StatefulSet's container does not run serve: %v", args)
	}
	penv := append(slices.Clone(ic.Env), "PATH="+os.Getenv("PATH"), "TMPDIR="+ic.Mounts["tmp"], "HOME="+ic.Mounts["tmp"])
	s.proc, err = testenv.StartProcess("claimstream-kc", server.Bin, args, filepath.Join(env.Dir, "logs"), penv)
	if err != nil {
		return nil, err
	}
	allPids = append(allPids, s.proc.Pid())
	onTeardown(func() { s.proc.Stop(10 * time.Second) })
	// As cluster-autoscaler does: the chart's client certificate.
	var clientSecret string
	for _, o := range objs {
		if o.GetKind() == "Secret" && strings.HasSuffix(o.GetName(), "-client-tls") {
			clientSecret = o.GetName()
		}
	}
	tc, err := clientTLS(ctx, kcRelease, clientSecret, "localhost")
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
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

// With the chart installed for real, its jobNamespace apart from its
// release namespace, serve (as the StatefulSet's Pod would run it) takes
// the Lease in the release namespace, labels its Pod there, writes its
// status ConfigMap there, and scales up and down with its Jobs in the job
// namespace.
func TestChartJobNamespaceLeadsAndScales(t *testing.T) {
	s := kcServer(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.tail())
		}
	})
	ctx := ctxFor(t, 3*time.Minute)
	kinds := map[string]int{}
	for _, o := range s.chart.Objects {
		kinds[o.GetKind()]++
	}
	t.Logf("chart installed: %d objects %v", len(s.chart.Objects), kinds)
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
	// The StatefulSet's Pod exists (unscheduled: its claim has no volume);
	// the leader labels it by POD_NAME and POD_NAMESPACE.
	waitT(t, 30*time.Second, "the leader labelled its Pod "+s.chart.PodName, func() (bool, string) {
		p, err := admin.CoreV1().Pods(kcRelease).Get(ctx, s.chart.PodName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Labels["claimstream.dev/leader"] == "true", fmt.Sprint(p.Labels)
	})
	startups, err := watchJobsFromNow(ctx, "", lOp+"=startup,"+lSlot+"=kc-1")
	if err != nil {
		t.Fatal(err)
	}
	defer startups.Stop()
	w := watchNode(t, "kc-1")
	s.increase(t, "kc", 1)
	if ns := addedJobNamespace(t, startups, 30*time.Second); ns != kcJobs {
		t.Errorf("kc-1's startup Job created in %q, want %q", ns, kcJobs)
	}
	waitT(t, 90*time.Second, "kc-1 booted through a Job in "+kcJobs+" and running", func() (bool, string) {
		return s.running(t, "kc", "kc-1")
	})
	waitT(t, 30*time.Second, "the status ConfigMap in the release namespace", func() (bool, string) {
		_, err := admin.CoreV1().ConfigMaps(kcRelease).Get(ctx, "claimstream-status", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if _, err := admin.CoreV1().ConfigMaps(kcJobs).Get(ctx, "claimstream-status", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a status ConfigMap in the job namespace: %v", err)
	}
	shutdowns, err := watchJobsFromNow(ctx, "", lOp+"=shutdown,"+lSlot+"=kc-1")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdowns.Stop()
	if _, err := s.provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{
		Id: "kc", Nodes: []*pb.ExternalGrpcNode{{ProviderID: providerID("kc-1"), Name: "kc-1"}},
	}); err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	waitChan(t, w.cordoned, 30*time.Second, "kc-1 cordoned")
	if ns := addedJobNamespace(t, shutdowns, 30*time.Second); ns != kcJobs {
		t.Errorf("kc-1's shutdown Job created in %q, want %q", ns, kcJobs)
	}
	waitChan(t, w.deleted, 90*time.Second, "kc-1 shut down by a Job in "+kcJobs+" and its Node deleted")
	waitT(t, 30*time.Second, "group kc back to no instance", func() (bool, string) {
		in := s.instances(t, "kc")
		return len(in) == 0, describeInstances(in)
	})
}

// addedJobNamespace is the namespace of the first Job w tells as added.
func addedJobNamespace(t *testing.T, w watch.Interface, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the Job watch ended")
			}
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				return j.Namespace
			}
		case <-deadline:
			t.Fatalf("no Job created within %s", timeout)
		}
	}
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
