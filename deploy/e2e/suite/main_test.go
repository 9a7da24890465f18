// Package suite is claimstream's end-to-end suite: `claimstream serve` as a
// separate process against a real control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) with kwok playing the kubelets
// and package machines playing the machines behind the slots.
//
//	cd deploy/e2e && go test ./... -timeout 25m -parallel 4
//
// The first run builds the control plane binaries (cached by version, see
// package testenv); later runs reuse them. -short skips the suite.
package suite

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/chartrender"
	"github.com/claimstream/claimstream/deploy/e2e/machines"
	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

const (
	// Namespace of the lifecycle Jobs (the chart's release namespace).
	namespace = "claimstream-e2e"
	// Release name the chart's RBAC is rendered with.
	releaseName = "e2e"
	workerNode  = "e2e-worker"
	workerKey   = "e2e.claimstream.dev/worker"
	readyTaint  = "e2e.claimstream.dev/not-ready"
)

var (
	env      *testenv.Env
	admin    kubernetes.Interface
	adminCfg *rest.Config
	model    *machines.Model
	server   *Server
	provider pb.CloudProviderClient
	// serverUser is who the claimstream server authenticates as.
	serverUser string

	teardownOnce sync.Once
	teardownFns  []func()
	startedAt    = time.Now()
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		return 0
	}
	defer testenv.KillAll()
	defer teardown()
	// go test's -timeout panics the binary without running defers: tear
	// down before it, so no process is left behind.
	if d := testTimeout(); d > 0 {
		margin := min(60*time.Second, d/10)
		t := time.AfterFunc(d-margin, func() {
			fmt.Fprintf(os.Stderr, "e2e: the test timeout (%s) is near: tearing down\n", d)
			if env != nil {
				env.Keep()
			}
			teardown()
			testenv.KillAll()
			os.Exit(3)
		})
		defer t.Stop()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "e2e: %s: tearing down\n", s)
		teardown()
		testenv.KillAll()
		os.Exit(4)
	}()

	ctx, cancel := context.WithCancel(context.Background())
	onTeardown(cancel)
	if err := setup(ctx); err != nil {
		if env != nil {
			env.Keep()
		}
		fmt.Fprintf(os.Stderr, "e2e: setup: %v\n", err)
		return 1
	}
	fmt.Printf("e2e: environment ready in %s\n", time.Since(startedAt).Round(time.Second))
	code = m.Run()
	if code != 0 {
		env.Keep()
	}
	teardown()
	if left := leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: processes left after teardown: %v\n", left)
		if code == 0 {
			code = 1
		}
	}
	fmt.Printf("e2e: total %s\n", time.Since(startedAt).Round(time.Second))
	return code
}

func testTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	d, _ := time.ParseDuration(f.Value.String())
	return d
}

func onTeardown(fn func()) { teardownFns = append(teardownFns, fn) }

// teardown runs the registered functions in reverse order, once.
func teardown() {
	teardownOnce.Do(func() {
		for i := len(teardownFns) - 1; i >= 0; i-- {
			teardownFns[i]()
		}
	})
}

// leftovers lists the process groups of this suite that still exist.
var allPids []int

func leftovers() []int {
	var out []int
	for _, pid := range allPids {
		if err := syscall.Kill(-pid, 0); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func setup(ctx context.Context) error {
	// Build claimstream while the control plane starts.
	binDir, err := os.MkdirTemp("", "claimstream-e2e-bin-")
	if err != nil {
		return err
	}
	onTeardown(func() { os.RemoveAll(binDir) })
	binCh := make(chan error, 1)
	bin := os.Getenv("CLAIMSTREAM_E2E_BINARY")
	if bin == "" {
		bin = filepath.Join(binDir, "claimstream")
		go func() { binCh <- buildClaimstream(ctx, bin) }()
	} else {
		binCh <- nil
	}

	envStart := time.Now()
	env, err = testenv.Start(ctx, testenv.Options{})
	if env != nil {
		onTeardown(env.Stop)
	}
	if err != nil {
		<-binCh
		return err
	}
	for _, p := range env.Processes() {
		allPids = append(allPids, p.Pid())
	}
	fmt.Printf("e2e: control plane in %s (%s)\n", time.Since(envStart).Round(time.Second), env.Dir)
	if err := <-binCh; err != nil {
		return err
	}

	adminCfg, err = clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		return err
	}
	adminCfg.QPS, adminCfg.Burst = 100, 200
	admin, err = kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return err
	}
	if err := prepareCluster(ctx); err != nil {
		return err
	}

	// The server's credentials: the chart's ServiceAccount and RBAC only,
	// unless CLAIMSTREAM_E2E_ADMIN=1.
	kcfg := env.Kubeconfig
	serverUser = "e2e-admin"
	if os.Getenv("CLAIMSTREAM_E2E_ADMIN") == "" {
		kcfg, serverUser, err = chartServiceAccountKubeconfig(ctx)
		if err != nil {
			return fmt.Errorf("chart RBAC: %w", err)
		}
	}

	// The machines.
	logf, err := os.Create(filepath.Join(env.Dir, "logs", "machines.log"))
	if err != nil {
		return err
	}
	onTeardown(func() { logf.Close() })
	model = machines.New(admin, namespace, e2eSlots(), machines.Knobs{BootDelay: time.Second, ReadyDelay: 3 * time.Second}, slog.New(slog.NewTextHandler(logf, nil)))
	mctx, mcancel := context.WithCancel(ctx)
	mdone := make(chan struct{})
	go func() { defer close(mdone); _ = model.Run(mctx) }()
	onTeardown(func() { mcancel(); <-mdone })

	// The kubelet's part in power drivers' Jobs: their container runs as a
	// process here.
	plogf, err := os.Create(filepath.Join(env.Dir, "logs", "powerjobs.log"))
	if err != nil {
		return err
	}
	onTeardown(func() { plogf.Close() })
	powerJobs := &machines.PowerJobs{Client: admin, Namespace: namespace, Binary: bin, Log: slog.New(slog.NewTextHandler(plogf, nil))}
	pctx, pcancel := context.WithCancel(ctx)
	pdone := make(chan struct{})
	go func() { defer close(pdone); _ = powerJobs.Run(pctx) }()
	onTeardown(func() { pcancel(); <-pdone })

	// The server.
	bmcPorts, err := testenv.FreePorts(len(ipmiSlots))
	if err != nil {
		return err
	}
	for i, s := range ipmiSlots {
		ipmiPorts[s] = bmcPorts[i]
	}
	pool := filepath.Join(env.Dir, "pool.yaml")
	if err := os.WriteFile(pool, []byte(e2ePoolFile()), 0o644); err != nil {
		return err
	}
	ports, err := testenv.FreePorts(3)
	if err != nil {
		return err
	}
	server = &Server{
		Bin: bin, Dir: env.Dir, Pool: pool, Kubeconfig: kcfg, Namespace: namespace,
		GRPCAddress:    fmt.Sprintf("127.0.0.1:%d", ports[0]),
		APIAddress:     fmt.Sprintf("127.0.0.1:%d", ports[1]),
		MetricsAddress: fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}
	onTeardown(server.Stop)
	if err := server.Start(ctx); err != nil {
		return err
	}
	conn, err := grpc.NewClient(server.GRPCAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	onTeardown(func() { conn.Close() })
	provider = pb.NewCloudProviderClient(conn)
	return waitProvider(ctx, 60*time.Second)
}

func buildClaimstream(ctx context.Context, out string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/claimstream")
	cmd.Dir = filepath.Join(chartrender.ChartDir(), "..", "..")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/claimstream: %w\n%s", err, b)
	}
	fmt.Printf("e2e: built claimstream in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// prepareCluster creates the namespace and the always-present worker node
// the lifecycle Job pods run on (kwok completes them), and waits for the
// namespace's default ServiceAccount (made by the controller-manager).
func prepareCluster(ctx context.Context) error {
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("500"),
	}
	worker := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        workerNode,
			Labels:      map[string]string{workerKey: "true", "kubernetes.io/hostname": workerNode, "type": "kwok"},
			Annotations: map[string]string{machines.KwokAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: workerKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, worker, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return poll(ctx, 90*time.Second, "worker node Ready and default ServiceAccount", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, workerNode, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !nodeReady(n) {
			return false, "worker not Ready"
		}
		if _, err := admin.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// powerSecrets are the credentials Secrets of the pool's ipmi slots, which
// the chart lets serve read (power.credentialsSecrets) for its power watch.
var powerSecrets = []any{"bmc", "bmc-wrong"}

// chartServiceAccountKubeconfig applies the chart's ServiceAccount and RBAC
// (rendered with the chart's defaults but power.credentialsSecrets) and
// returns a kubeconfig with a token of that ServiceAccount.
func chartServiceAccountKubeconfig(ctx context.Context) (string, string, error) {
	objs, err := chartrender.Render(releaseName, namespace, map[string]any{"power": map[string]any{"credentialsSecrets": powerSecrets}})
	if err != nil {
		return "", "", err
	}
	saName := ""
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			if o.GetLabels()["app.kubernetes.io/component"] == "" {
				saName = o.GetName()
			}
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if err := createTyped(ctx, o); err != nil {
			return "", "", fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if saName == "" {
		return "", "", fmt.Errorf("the chart renders no ServiceAccount")
	}
	exp := int64(4 * 3600)
	tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, saName, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", "", err
	}
	user := "system:serviceaccount:" + namespace + ":" + saName
	path := filepath.Join(env.Dir, "claimstream-sa.kubeconfig")
	if err := os.WriteFile(path, []byte(testenv.KubeconfigToken(env.Host, env.CAPEM, saName, tr.Status.Token)), 0o600); err != nil {
		return "", "", err
	}
	return path, user, nil
}

// createTyped creates an RBAC object or ServiceAccount from its unstructured form.
func createTyped(ctx context.Context, o *unstructured.Unstructured) error {
	var err error
	switch o.GetKind() {
	case "ServiceAccount":
		var x corev1.ServiceAccount
		if err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &x); err == nil {
			_, err = admin.CoreV1().ServiceAccounts(x.Namespace).Create(ctx, &x, metav1.CreateOptions{})
		}
	default:
		err = applyDynamic(ctx, o, false)
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func waitProvider(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, "the provider lists the e2e groups", func() (bool, string) {
		if done, err := server.proc.Exited(); done {
			return false, fmt.Sprintf("server exited: %v%s", err, server.Tail())
		}
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		r, err := provider.NodeGroups(c, &pb.NodeGroupsRequest{})
		if err != nil {
			return false, err.Error()
		}
		if len(r.GetNodeGroups()) < 4 {
			return false, fmt.Sprintf("%d groups", len(r.GetNodeGroups()))
		}
		return true, ""
	})
}

// poll calls fn every 200ms until it returns true or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, fn func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		ok, msg := fn()
		if ok {
			return nil
		}
		last = msg
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %s (last: %s)", what, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
