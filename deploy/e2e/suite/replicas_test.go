package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/machines"
	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// The three replicas of TestThreeReplicasFailoverMidBoot have a pool, a
// namespace (their Jobs and their Lease) and a Lease of their own, so the
// suite's shared server and its scenarios are not disturbed: the shared
// server knows no group "ha" and no slot "ha-1".
const (
	haNamespace = "claimstream-e2e-ha"
	haLease     = "claimstream-ha"
	haGroup     = "ha"
	haSlot      = "ha-1"
	haAPIToken  = "e2e-ha-api-token-0123456789abcdef"
	// The Lease is 15s; a survivor takes it once it stayed unchanged for
	// 15s, then appends its election: 45s is the lease and a reconcile
	// with room for a slow, shared machine.
	haFailoverBound = 45 * time.Second
)

const haPool = `
groups:
  - name: ha
    maxSize: 1
    readinessTaints: [{key: e2e.claimstream.dev/not-ready, effect: NoExecute}]
    lifecycle: {startupJobTimeout: 30s, registrationWait: 90s, readinessGate: 30s}
    template:
      capacity: {cpu: "8", memory: 32Gi, pods: "110"}

slots:
  - name: ha-1
    group: ha
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
`

// haReplica is one `claimstream serve` replica of the three.
type haReplica struct {
	name, grpcAddr, apiAddr string
	proc                    *testenv.Process
	provider                pb.CloudProviderClient
	args, env               []string // to start it again
}

func (r *haReplica) tail() string {
	return "\n--- " + r.name + " log tail ---\n" + testenv.TailFile(r.proc.LogPath, 4000)
}

func (r *haReplica) increaseSize(delta int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.provider.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: haGroup, Delta: delta})
	return err
}

func (r *haReplica) targetSize() (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := r.provider.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: haGroup})
	return res.GetTargetSize(), err
}

func (r *haReplica) instance() (*pb.Instance, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := r.provider.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: haGroup})
	if err != nil {
		return nil, err
	}
	for _, in := range res.GetInstances() {
		if in.GetId() == providerID(haSlot) {
			return in, nil
		}
	}
	return nil, nil
}

type haClaim struct {
	Name, Slot, Phase string
}

// claims is GET /api/v1/claims?group=ha of the replica's REST API.
func (r *haReplica) claims() ([]haClaim, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.apiAddr+"/api/v1/claims?group="+haGroup, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+haAPIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s GET /api/v1/claims: %s", r.name, resp.Status)
	}
	var l struct{ Items []haClaim }
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, fmt.Errorf("%s GET /api/v1/claims: %w", r.name, err)
	}
	return l.Items, nil
}

// haEvent is one line of GET /api/v1/events/export.
type haEvent struct {
	Type        string          `json:"type"`
	LeaderEpoch string          `json:"leaderepoch"`
	Data        json.RawMessage `json:"data"`
}

// export is the replica's whole log, GET /api/v1/events/export (NDJSON).
func (r *haReplica) export() ([]haEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.apiAddr+"/api/v1/events/export", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+haAPIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s GET /api/v1/events/export: %s", r.name, resp.Status)
	}
	var out []haEvent
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var e haEvent
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%s export: %w", r.name, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// checkFailoverLog holds for the new leader's log: two elections at least,
// the last one the new leader's; one claim created, booted (by the killed
// leader: the new one did not decide a second boot) and made ready by the
// new leader, under its epoch.
func checkFailoverLog(t *testing.T, r *haReplica, killed, next string) {
	t.Helper()
	evs, err := r.export()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	epochOf := map[string]string{}
	var elected []string
	lastEpoch, lastReplica := "", ""
	for _, e := range evs {
		name := strings.TrimSuffix(strings.TrimPrefix(e.Type, "dev.claimstream."), ".v1")
		count[name]++
		epochOf[name] = e.LeaderEpoch
		if name == "LeaderElected" {
			var le struct {
				Replica string `json:"replica"`
				Epoch   uint64 `json:"epoch"`
			}
			if err := json.Unmarshal(e.Data, &le); err != nil {
				t.Fatalf("LeaderElected %s: %v", e.Data, err)
			}
			elected = append(elected, fmt.Sprintf("%s@%d", le.Replica, le.Epoch))
			lastEpoch, lastReplica = fmt.Sprint(le.Epoch), le.Replica
		}
	}
	t.Logf("elections in the log: %v", elected)
	if len(elected) < 2 || lastReplica != next {
		t.Fatalf("elections %v: want two or more, the last one %s", elected, next)
	}
	for _, typ := range []string{"ClaimCreated", "ClaimBooting", "ClaimReady"} {
		if count[typ] != 1 {
			t.Fatalf("%d %s events in the log, want 1 (counts %v)", count[typ], typ, count)
		}
	}
	if epochOf["ClaimBooting"] == lastEpoch {
		t.Fatalf("ClaimBooting under epoch %s, the new leader's: want the killed leader %s's", lastEpoch, killed)
	}
	if epochOf["ClaimReady"] != lastEpoch {
		t.Fatalf("ClaimReady under epoch %s, want the new leader's %s", epochOf["ClaimReady"], lastEpoch)
	}
}

// startHAReplicas starts three serve replicas sharing one log through an
// embedded NATS cluster on loopback, electing their leader with a Lease on
// the suite's apiserver. They run as the suite's admin: the chart's RBAC
// is bound in the suite's namespace only. Every process dies with the test.
func startHAReplicas(t *testing.T) []*haReplica {
	t.Helper()
	return startHAReplicasIn(t, haSetup{dir: "ha", lease: haLease, pool: haPool})
}

// haSetup is where three replicas keep their data and files (under
// env.Dir), the name of their Lease and their pool: a test of its own
// shares neither the others' log, nor their leader, nor their slots.
type haSetup struct{ dir, lease, pool string }

func startHAReplicasIn(t *testing.T, setup haSetup) []*haReplica {
	t.Helper()
	dir := filepath.Join(env.Dir, setup.dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pool := filepath.Join(dir, "pool.yaml")
	secret := filepath.Join(dir, "route-secret")
	if err := os.WriteFile(pool, []byte(setup.pool), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("e2e-ha-route-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := testenv.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("127.0.0.1:%d", ports[6+i]))
	}
	var replicas []*haReplica
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, r := range replicas {
			wg.Add(1)
			go func() { defer wg.Done(); r.proc.Stop(10 * time.Second) }()
		}
		wg.Wait()
	})
	for i := range 3 {
		r := &haReplica{
			name:     fmt.Sprintf("ha-replica-%d", i),
			grpcAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			apiAddr:  fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]),
		}
		args := []string{"serve",
			"--config", pool, "--config-poll", "1h",
			"--kubeconfig", env.Kubeconfig,
			"--namespace", haNamespace,
			"--leader-elect=true", "--lease-name", setup.lease,
			"--data-dir", filepath.Join(dir, "data-"+r.name),
			"--replica-name", r.name, "--replicas", "3",
			"--nats-cluster-listen", routes[i],
			"--nats-routes", "nats-route://" + strings.Join(routes, ",nats-route://"),
			"--nats-cluster-password-file", secret,
			"--grpc-address", r.grpcAddr, "--plaintext",
			"--api-address", r.apiAddr, "--api-token", haAPIToken,
			"--metrics-address=",
			"--log-level=debug",
		}
		// No POD_NAME: a replica outside a Pod labels no Pod.
		var penv []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "POD_NAME=") && !strings.HasPrefix(kv, "POD_NAMESPACE=") {
				penv = append(penv, kv)
			}
		}
		r.args, r.env = args, penv
		r.proc, err = testenv.StartProcess(r.name, server.Bin, args, filepath.Join(env.Dir, "logs"), penv)
		if err != nil {
			t.Fatal(err)
		}
		allPids = append(allPids, r.proc.Pid())
		conn, err := grpc.NewClient(r.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		r.provider = pb.NewCloudProviderClient(conn)
		replicas = append(replicas, r)
	}
	return replicas
}

// haLeaseHolder is the holderIdentity of the replicas' Lease, or "".
func haLeaseHolder(t *testing.T) (string, error) {
	return haLeaseHolderOf(t, haLease)
}

// haLeaseHolderOf is the holderIdentity of the Lease lease, or "".
func haLeaseHolderOf(t *testing.T, lease string) (string, error) {
	l, err := admin.CoordinationV1().Leases(haNamespace).Get(ctxFor(t, 10*time.Second), lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

func prepareHANamespace(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: haNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The startup Job's pod needs the namespace's default ServiceAccount.
	waitT(t, 60*time.Second, "namespace "+haNamespace+" has its default ServiceAccount", func() (bool, string) {
		_, err := admin.CoreV1().ServiceAccounts(haNamespace).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// 7. Three serve replicas share one log and elect a leader with a Lease on
// the real apiserver; the leader is killed (-9) while its claim boots. A
// survivor takes the Lease within the lease and a reconcile, finishes the
// boot without a second startup Job, and both survivors agree on the
// group's size; the acknowledged IncreaseSize is not lost.
func TestThreeReplicasFailoverMidBoot(t *testing.T) {
	prepareHANamespace(t)
	t.Cleanup(func() {
		// After the replicas and the model have stopped (cleanups run last
		// in, first out): the machine's Node goes, the namespace with its
		// Jobs and Lease too.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = admin.CoreV1().Nodes().Delete(ctx, haSlot, metav1.DeleteOptions{})
		_ = admin.CoreV1().Namespaces().Delete(ctx, haNamespace, metav1.DeleteOptions{})
	})

	// The machine of slot ha-1: a model of its own, watching the replicas'
	// namespace. It is switched on by hand once the new leader holds the
	// Lease, so its boot spans the failover: the Node registers under the
	// new leader and sheds its readiness taint 6s later. The registration
	// wait (90s) covers the failover bound.
	logf, err := os.Create(filepath.Join(env.Dir, "logs", "machines-ha.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	haModel := machines.New(admin, haNamespace, []machines.Slot{{
		Name: haSlot,
		// The group label a template gives its hosts: the shared server
		// sees a Node that names a group it does not manage.
		Labels:          map[string]string{"claimstream.dev/group": haGroup},
		ReadinessTaints: []corev1.Taint{{Key: readyTaint, Effect: corev1.TaintEffectNoExecute}},
	}}, machines.Knobs{NeverBoots: true, ReadyDelay: 6 * time.Second}, slog.New(slog.NewTextHandler(logf, nil)))
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	go func() { defer close(mdone); _ = haModel.Run(mctx) }()
	t.Cleanup(func() { mcancel(); <-mdone })

	replicas := startHAReplicas(t)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, r := range replicas {
			t.Log(r.tail())
		}
		var b strings.Builder
		for _, e := range haModel.Events() {
			fmt.Fprintf(&b, "%s %s %s %s\n", e.At.Format("15:04:05.000"), e.Slot, e.What, e.Job)
		}
		t.Logf("machine events:\n%s", b.String())
		js, _ := admin.BatchV1().Jobs(haNamespace).List(context.Background(), metav1.ListOptions{})
		b.Reset()
		for _, j := range js.Items {
			fmt.Fprintf(&b, "%s %v %s\n", j.Name, j.Labels, jobPhase(&j))
		}
		t.Logf("jobs of %s:\n%s", haNamespace, b.String())
	})
	byName := map[string]*haReplica{}
	for _, r := range replicas {
		byName[r.name] = r
	}

	// A leader: the Lease on the apiserver names a replica, and every
	// replica's provider knows the group.
	var leader *haReplica
	waitT(t, 120*time.Second, "a replica holds the Lease and every provider answers", func() (bool, string) {
		for _, r := range replicas {
			if done, err := r.proc.Exited(); done {
				t.Fatalf("%s exited: %v%s", r.name, err, r.tail())
			}
		}
		holder, err := haLeaseHolder(t)
		if err != nil {
			return false, err.Error()
		}
		leader = byName[holder]
		if leader == nil {
			return false, fmt.Sprintf("holder %q", holder)
		}
		for _, r := range replicas {
			if n, err := r.targetSize(); err != nil || n != 0 {
				return false, fmt.Sprintf("%s: TargetSize %d, %v", r.name, n, err)
			}
		}
		return true, ""
	})
	t.Logf("leader: %s", leader.name)

	// A follower refuses the write, naming the leader, and changes nothing.
	var follower *haReplica
	for _, r := range replicas {
		if r != leader {
			follower = r
			break
		}
	}
	// (Until the follower has read the leader's election it may not name
	// it yet; it must never acknowledge.)
	waitT(t, 30*time.Second, "follower "+follower.name+" refuses IncreaseSize, naming the leader", func() (bool, string) {
		err := follower.increaseSize(1)
		if err == nil {
			t.Fatalf("IncreaseSize through follower %s acknowledged, want Unavailable naming the leader %s", follower.name, leader.name)
		}
		if status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), leader.name) {
			return true, ""
		}
		return false, err.Error()
	})

	if n, err := leader.targetSize(); err != nil || n != 0 {
		t.Fatalf("TargetSize after the follower's refusal = %d, %v; want 0 (a refused write changes nothing)", n, err)
	}

	// The acknowledged IncreaseSize, through the leader.
	if err := leader.increaseSize(1); err != nil {
		t.Fatalf("IncreaseSize(%s, 1) through the leader %s: %v", haGroup, leader.name, err)
	}
	var job string
	waitT(t, 60*time.Second, "startup Job of "+haSlot+" created on the apiserver", func() (bool, string) {
		js := haJobs(t, map[string]string{lOp: "startup", lSlot: haSlot})
		if len(js) == 0 {
			return false, "no Job"
		}
		job = js[0].Name
		return true, ""
	})
	if _, ok := node(t, haSlot); ok {
		t.Fatalf("the Node of %s registered before the kill: not mid-boot", haSlot)
	}

	// kill -9 of the leader mid-boot.
	leader.proc.Kill()
	killedAt := time.Now()
	t.Logf("killed the leader %s (-9) with %s created", leader.name, job)
	var survivors []*haReplica
	for _, r := range replicas {
		if r != leader {
			survivors = append(survivors, r)
		}
	}

	var next *haReplica
	waitT(t, haFailoverBound, "a survivor holds the Lease", func() (bool, string) {
		holder, err := haLeaseHolder(t)
		if err != nil {
			return false, err.Error()
		}
		if r := byName[holder]; r != nil && r != leader {
			next = r
			return true, ""
		}
		return false, fmt.Sprintf("holder %q", holder)
	})
	t.Logf("failover: kill -9 to a new Lease holder (%s) in %s", next.name, time.Since(killedAt).Round(100*time.Millisecond))

	// The startup Job ran to completion (the real Job controller), and the
	// machine comes up only now, under the new leader.
	waitT(t, 60*time.Second, "startup Job "+job+" Complete", func() (bool, string) {
		js := haJobs(t, map[string]string{lOp: "startup", lSlot: haSlot})
		if len(js) == 0 {
			return false, "no Job"
		}
		return jobPhase(&js[0]) == "Complete", jobPhase(&js[0])
	})
	if err := haModel.PowerOn(ctxFor(t, 30*time.Second), haSlot); err != nil {
		t.Fatal(err)
	}
	poweredAt := time.Now()
	// The new leader holds the readiness gate: Ready but still tainted is
	// not ready.
	waitT(t, 30*time.Second, haSlot+" registered, Ready, still carrying the readiness taint", func() (bool, string) {
		n, ok := node(t, haSlot)
		if !ok || !nodeReady(n) || !hasTaint(n, readyTaint) {
			return false, fmt.Sprintf("node present=%v", ok)
		}
		return true, ""
	})
	// The new leader's views may still be catching up (its reader's
	// consumer may have been on the killed server): it answers
	// Unavailable, retry shortly, as cluster-autoscaler would. Asked
	// while the taint is still on, it must not say running.
	waitT(t, 10*time.Second, "the new leader's provider lists "+haSlot+" while the taint is on", func() (bool, string) {
		in, err := next.instance()
		if status.Code(err) == codes.Unavailable {
			return false, err.Error()
		}
		if n, ok := node(t, haSlot); !ok || !hasTaint(n, readyTaint) {
			t.Fatalf("%s shed its readiness taint before %s's provider answered (%v)", haSlot, next.name, err)
		}
		if err != nil || in == nil || in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning {
			t.Fatalf("%s is Ready but tainted: instance %v (%v) on %s, want creating (the readiness gate holds)", haSlot, in, err, next.name)
		}
		return true, ""
	})

	// The claim finishes under the new leader: the Node Ready without the
	// readiness taint, the instance running on both survivors' providers,
	// the claim ready in a survivor's REST API.
	waitT(t, 120*time.Second, "the claim ready on both survivors after the failover", func() (bool, string) {
		n, ok := node(t, haSlot)
		if !ok || !nodeReady(n) || hasTaint(n, readyTaint) {
			return false, fmt.Sprintf("node present=%v", ok)
		}
		for _, r := range survivors {
			in, err := r.instance()
			if err != nil {
				return false, fmt.Sprintf("%s: %v", r.name, err)
			}
			if in.GetStatus().GetInstanceState() != pb.InstanceStatus_instanceRunning {
				return false, fmt.Sprintf("%s: instance %v", r.name, in)
			}
		}
		cls, err := next.claims()
		if err != nil {
			return false, err.Error()
		}
		if len(cls) != 1 || cls[0].Slot != haSlot || cls[0].Phase != "ready" {
			return false, fmt.Sprintf("claims %v", cls)
		}
		return true, ""
	})

	t.Logf("boot under the new leader: power-on to a ready claim in %s", time.Since(poweredAt).Round(100*time.Millisecond))

	// Exactly one startup Job for the attempt: the new leader did not start
	// the machine a second time.
	js := haJobs(t, map[string]string{lOp: "startup", lSlot: haSlot})
	if len(js) != 1 {
		var names []string
		for _, j := range js {
			names = append(names, j.Name)
		}
		t.Fatalf("startup Jobs of %s: %v, want exactly one", haSlot, names)
	}
	if js[0].Name != job || js[0].Labels[lAttempt] != "1" {
		t.Fatalf("startup Job %s (%v), want %s attempt 1", js[0].Name, js[0].Labels, job)
	}

	// No acknowledged IncreaseSize lost, and the survivors agree.
	for _, r := range survivors {
		n, err := r.targetSize()
		if err != nil || n != 1 {
			t.Fatalf("TargetSize(%s) on %s = %d, %v; want 1", haGroup, r.name, n, err)
		}
		cls, err := r.claims()
		if err != nil || len(cls) != 1 {
			t.Fatalf("claims of %s on %s: %v, %v; want the one acknowledged", haGroup, r.name, cls, err)
		}
	}

	checkFailoverLog(t, next, leader.name, next.name)

	// The suite's shared server ignored all of it: no group "ha", the Node
	// of ha-1 neither cordoned nor refused, no Job of ha-1 in its namespace.
	if r, err := provider.NodeGroups(ctxFor(t, 10*time.Second), &pb.NodeGroupsRequest{}); err != nil {
		t.Fatalf("shared server NodeGroups: %v", err)
	} else {
		for _, g := range r.GetNodeGroups() {
			if g.GetId() == haGroup {
				t.Fatalf("the shared server lists group %s", haGroup)
			}
		}
	}
	if n, ok := node(t, haSlot); !ok || n.Labels["claimstream.dev/group"] != haGroup || n.Spec.Unschedulable || hasTaint(n, "claimstream.dev/refused") {
		t.Fatalf("node %s (group label %q) touched by the shared server: present=%v", haSlot, n.Labels["claimstream.dev/group"], ok)
	}
	if js := jobs(t, map[string]string{lSlot: haSlot}); len(js) != 0 {
		t.Fatalf("the shared server made %d Jobs for %s in %s", len(js), haSlot, namespace)
	}
}

// haJobs lists the lifecycle Jobs of the replicas' namespace matching labels.
func haJobs(t *testing.T, labels map[string]string) []batchv1.Job {
	t.Helper()
	var sel []string
	for k, v := range labels {
		sel = append(sel, k+"="+v)
	}
	l, err := admin.BatchV1().Jobs(haNamespace).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: strings.Join(sel, ",")})
	if err != nil {
		t.Fatalf("list jobs of %s: %v", haNamespace, err)
	}
	return l.Items
}
