package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/chartrender"
	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// The release of this file: its own namespace, groups and slots.
const (
	puRelease     = "pu-release"
	puReleaseName = "pu"
	puGroup       = "pu"
	puSlots       = 3
)

// puPool is the pool.config of group pu with maxSize max over puSlots
// slots. The startup Jobs complete on the worker node (kwok) and no
// machine registers: the claims stay live through the registration wait,
// far longer than the test.
func puPool(t *testing.T, max int) map[string]any {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `
groups:
  - name: %s
    maxSize: %d
    lifecycle: {startupJobTimeout: 5m, registrationWait: 30m, readinessGate: 30m}
    template:
      capacity: {cpu: "8", memory: 32Gi, pods: "110"}
slots:
`, puGroup, max)
	for i := 1; i <= puSlots; i++ {
		fmt.Fprintf(&b, `  - name: %s-%d
    group: %s
    startup:
      podSpec:
        restartPolicy: Never
        nodeSelector: {%s: "true"}
        tolerations: [{key: %s, operator: Exists, effect: NoSchedule}]
        containers: [{name: power, image: e2e.invalid/power:never-pulled, command: ["/bin/true"]}]
`, puGroup, i, puGroup, workerKey, workerKey)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(b.String()), &cfg); err != nil {
		t.Fatalf("the pool: %v", err)
	}
	return cfg
}

func puRender(pool map[string]any) ([]*unstructured.Unstructured, error) {
	return chartrender.Render(puReleaseName, puRelease, map[string]any{"pool": map[string]any{"config": pool}})
}

// puPoolFile is what /readyz and the status ConfigMap say of the pool file.
type puPoolFile struct {
	File    string `json:"file"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason"`
	Error   string `json:"error"`
}

// puServe is serve as the release's StatefulSet Pod runs it, started again
// as the Pod rolled by an upgrade would be.
type puServe struct {
	chart    *installedChart
	args     []string
	env      []string
	proc     *testenv.Process
	provider pb.CloudProviderClient
	starts   int
}

func (s *puServe) tail() string {
	return "\n--- " + s.proc.Name + " log tail ---\n" + testenv.TailFile(s.proc.LogPath, 6000)
}

func (s *puServe) start(t *testing.T) {
	t.Helper()
	s.starts++
	p, err := testenv.StartProcess(fmt.Sprintf("claimstream-pu-%d", s.starts), server.Bin, s.args, filepath.Join(env.Dir, "logs"), s.env)
	if err != nil {
		t.Fatal(err)
	}
	allPids = append(allPids, p.Pid())
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	s.proc = p
}

// groupSizes is the provider's answer for group pu: its maxSize
// (NodeGroups) and target size (NodeGroupTargetSize).
func (s *puServe) groupSizes(ctx context.Context) (maxSize, target int32, err error) {
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	gs, err := s.provider.NodeGroups(c, &pb.NodeGroupsRequest{})
	if err != nil {
		return 0, 0, err
	}
	var ids []string
	for _, g := range gs.GetNodeGroups() {
		ids = append(ids, g.GetId())
		if g.GetId() == puGroup {
			maxSize = g.GetMaxSize()
		}
	}
	if !slices.Equal(ids, []string{puGroup}) {
		return 0, 0, fmt.Errorf("node groups %v, want %s alone", ids, puGroup)
	}
	ts, err := s.provider.NodeGroupTargetSize(c, &pb.NodeGroupTargetSizeRequest{Id: puGroup})
	if err != nil {
		return 0, 0, err
	}
	return maxSize, ts.GetTargetSize(), nil
}

// readyz is serve's /readyz answer: its code and the poolFile detail.
func (s *puServe) readyz() (int, string, *puPoolFile, error) {
	resp, err := http.Get("http://" + s.chart.Listen["--api-address"] + "/readyz")
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var h struct {
		Status   string      `json:"status"`
		PoolFile *puPoolFile `json:"poolFile"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return resp.StatusCode, "", nil, fmt.Errorf("/readyz %d %s: %w", resp.StatusCode, body, err)
	}
	return resp.StatusCode, h.Status, h.PoolFile, nil
}

// metric is the value of the series line of serve's /metrics that starts
// with series and a space ("" when there is none).
func (s *puServe) metric(series string) (string, error) {
	resp, err := http.Get("http://" + s.chart.Listen["--metrics-address"] + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v, nil
		}
	}
	return "", nil
}

// statusPoolFile is the poolFile of the status ConfigMap the leader writes
// in the release namespace.
func statusPoolFile(ctx context.Context) (*puPoolFile, error) {
	cm, err := admin.CoreV1().ConfigMaps(puRelease).Get(ctx, "claimstream-status", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var st struct {
		PoolFile *puPoolFile `json:"poolFile"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["status"]), &st); err != nil {
		return nil, fmt.Errorf("status ConfigMap: %w", err)
	}
	return st.PoolFile, nil
}

// A `helm upgrade` whose pool.config renders but that the log refuses (a
// maxSize below the live claims) rolls the only Pod; serve, started again
// on that file with a log behind it, keeps answering cluster-autoscaler
// with the pool the log holds and reports the file everywhere an operator
// looks: /readyz (still 200), the metric, the status ConfigMap and a
// PoolFileRefused Event on its Pod. The next valid file the kubelet writes
// into the volume is applied without a restart. A pool.config serve would
// refuse as invalid (maxSize -1) does not render, so that upgrade stops
// before any object changes.
func TestHelmUpgradeWithARefusedPoolKeepsTheProvider(t *testing.T) {
	started := time.Now()
	ctx := ctxFor(t, 5*time.Minute)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: puRelease}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), puRelease, metav1.DeleteOptions{})
	})
	waitT(t, 60*time.Second, "namespace "+puRelease+" has its default ServiceAccount", func() (bool, string) {
		_, err := admin.CoreV1().ServiceAccounts(puRelease).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// helm install: the chart with a valid pool of maxSize 2.
	objs, err := puRender(puPool(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(env.Dir, "pu")
	ic, err := installChart(ctx, objs, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--grpc-address", "--api-address", "--metrics-address"} {
		if ic.Listen[flag] == "" {
			t.Fatalf("the StatefulSet's container has no %s listener: %v", flag, ic.Args)
		}
	}
	// In a Pod the ServiceAccount's token comes in-cluster; here a
	// kubeconfig carries a token of the same ServiceAccount.
	exp := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(puRelease).CreateToken(ctx, ic.ServiceAccount, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kcfg := filepath.Join(dir, "sa.kubeconfig")
	if err := os.WriteFile(kcfg, []byte(testenv.KubeconfigToken(env.Host, env.CAPEM, ic.ServiceAccount, tr.Status.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &puServe{
		chart: ic,
		args:  append(slices.Clone(ic.Args), "--kubeconfig="+kcfg),
		env:   append(slices.Clone(ic.Env), "PATH="+os.Getenv("PATH"), "TMPDIR="+ic.Mounts["tmp"], "HOME="+ic.Mounts["tmp"]),
	}
	if s.args[0] != "serve" {
		t.Fatalf("the StatefulSet's container does not run serve: %v", s.args)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.tail())
		}
	})
	// As cluster-autoscaler does: the chart's client certificate.
	var clientSecret string
	for _, o := range objs {
		if o.GetKind() == "Secret" && strings.HasSuffix(o.GetName(), "-client-tls") {
			clientSecret = o.GetName()
		}
	}
	tc, err := clientTLS(ctx, puRelease, clientSecret, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(ic.Listen["--grpc-address"], grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.provider = pb.NewCloudProviderClient(conn)

	s.start(t)
	// sizes waits until the provider answers group pu with maxSize and
	// target, serve running all along.
	sizes := func(what string, maxSize, target int32) {
		t.Helper()
		waitT(t, 90*time.Second, what, func() (bool, string) {
			if done, err := s.proc.Exited(); done {
				t.Fatalf("serve exited: %v%s", err, s.tail())
			}
			m, ts, err := s.groupSizes(ctx)
			if err != nil {
				return false, err.Error()
			}
			return m == maxSize && ts == target, fmt.Sprintf("maxSize %d, target size %d", m, ts)
		})
	}
	sizes("the installed release answers group pu of maxSize 2", 2, 0)
	if _, err := s.provider.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: puGroup, Delta: 2}); err != nil {
		t.Fatalf("IncreaseSize(%s, 2): %v%s", puGroup, err, s.tail())
	}
	sizes("two live claims", 2, 2)

	// helm upgrade with maxSize -1: refused at render time, with the field
	// named, before the API server sees anything.
	if _, err := puRender(map[string]any{
		"groups": []any{map[string]any{"name": puGroup, "maxSize": -1}},
		"slots":  []any{map[string]any{"name": puGroup + "-1", "group": puGroup}},
	}); err == nil || !strings.Contains(err.Error(), "/pool/config/groups/0/maxSize") || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("rendering maxSize -1: %v, want an error naming /pool/config/groups/0/maxSize and its minimum", err)
	} else {
		t.Logf("maxSize -1 refused at render time: %v", err)
	}

	// helm upgrade with maxSize 1: it renders (1 is within the group's 3
	// slots); the log refuses it (two live claims). The pool ConfigMap and
	// the StatefulSet change on the API server; the pod template's new
	// pool checksum rolls the Pod.
	poolCM := ic.volumes["pool"].ConfigMap
	if poolCM == nil {
		t.Fatalf("the pool volume is not a ConfigMap: %+v", ic.volumes["pool"])
	}
	sts := func() *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == "StatefulSet" {
				return o
			}
		}
		t.Fatal("the chart renders no StatefulSet")
		return nil
	}()
	checksum := func() string {
		got, err := admin.AppsV1().StatefulSets(puRelease).Get(ctx, sts.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Spec.Template.Annotations["checksum/pool"]
	}
	installed := checksum()
	upgrade := func(max int, kinds ...string) {
		t.Helper()
		objs, err := puRender(puPool(t, max))
		if err != nil {
			t.Fatalf("rendering maxSize %d: %v", max, err)
		}
		n := 0
		for _, o := range objs {
			if slices.Contains(kinds, o.GetKind()) && (o.GetKind() != "ConfigMap" || o.GetName() == poolCM.Name) {
				if err := updateDynamic(ctx, o); err != nil {
					t.Fatalf("update %s %s: %v", o.GetKind(), o.GetName(), err)
				}
				n++
			}
		}
		if n != len(kinds) {
			t.Fatalf("the upgrade's render has %d of the objects %v", n, kinds)
		}
	}
	upgrade(1, "ConfigMap", "StatefulSet")
	if rolled := checksum(); rolled == "" || rolled == installed {
		t.Fatalf("the StatefulSet's checksum/pool %q after the upgrade, was %q: the Pod would not roll", rolled, installed)
	}
	// The rolled Pod: the old process stops, the new one starts with the
	// volume as the kubelet mounts it now, on the same data volume.
	s.proc.Stop(30 * time.Second)
	if err := ic.Remount(ctx, "pool"); err != nil {
		t.Fatal(err)
	}
	s.start(t)

	sizes("the rolled serve answers the log's pool (maxSize 2, two claims)", 2, 2)
	waitT(t, 60*time.Second, "the file reported as refused: /readyz 200 with poolFile, the metric 0, the failures counted, the status ConfigMap", func() (bool, string) {
		code, status, pf, err := s.readyz()
		if err != nil {
			return false, err.Error()
		}
		if code != http.StatusOK || status != "ready" {
			return false, fmt.Sprintf("/readyz %d %q", code, status)
		}
		if pf == nil || pf.Applied || pf.Reason != "refused" || !strings.Contains(pf.Error, "maxSize 1") || pf.File != ic.Mounts["pool"]+"/pool.yaml" {
			return false, fmt.Sprintf("/readyz poolFile %+v", pf)
		}
		if v, err := s.metric("claimstream_pool_file_applied"); err != nil || v != "0" {
			return false, fmt.Sprintf("claimstream_pool_file_applied %q (%v)", v, err)
		}
		failures := `claimstream_pool_file_apply_failures_total{reason="refused"}`
		if v, err := s.metric(failures); err != nil || v == "" || v == "0" {
			return false, fmt.Sprintf("%s %q (%v)", failures, v, err)
		}
		st, err := statusPoolFile(ctx)
		if err != nil {
			return false, err.Error()
		}
		if st == nil || st.Applied || st.Reason != "refused" || !strings.Contains(st.Error, "maxSize 1") {
			return false, fmt.Sprintf("status ConfigMap poolFile %+v", st)
		}
		return true, ""
	})
	if ev := waitKubeEvent(t, puRelease, ic.PodName, "PoolFileRefused", "not applied (refused)"); ev.Type != corev1.EventTypeWarning {
		t.Errorf("the PoolFileRefused Event is of type %q, want Warning", ev.Type)
	}
	if b, err := os.ReadFile(s.proc.LogPath); err != nil || !strings.Contains(string(b), "pool file not applied; serving the pool the log holds") {
		t.Errorf("the rolled serve's log does not say the pool file was not applied (%v)", err)
	}
	sizes("the provider still answers the log's pool", 2, 2)

	// The fix: pool.config with maxSize 3. The kubelet writes the new
	// ConfigMap into the running Pod's volume; serve applies it at its
	// next poll, without a restart.
	rolled := s.proc
	upgrade(3, "ConfigMap")
	if err := ic.Remount(ctx, "pool"); err != nil {
		t.Fatal(err)
	}
	sizes("the fixed file applied: maxSize 3, the two claims kept", 3, 2)
	waitT(t, 60*time.Second, "the file reported as applied: /readyz without poolFile, the metric 1, the status ConfigMap", func() (bool, string) {
		code, status, pf, err := s.readyz()
		if err != nil {
			return false, err.Error()
		}
		if code != http.StatusOK || status != "ready" || pf != nil {
			return false, fmt.Sprintf("/readyz %d %q poolFile %+v", code, status, pf)
		}
		if v, err := s.metric("claimstream_pool_file_applied"); err != nil || v != "1" {
			return false, fmt.Sprintf("claimstream_pool_file_applied %q (%v)", v, err)
		}
		st, err := statusPoolFile(ctx)
		if err != nil {
			return false, err.Error()
		}
		if st == nil || !st.Applied || st.Error != "" {
			return false, fmt.Sprintf("status ConfigMap poolFile %+v", st)
		}
		return true, ""
	})
	if ev := waitKubeEvent(t, puRelease, ic.PodName, "PoolFileApplied", "applied"); ev.Type != corev1.EventTypeNormal {
		t.Errorf("the PoolFileApplied Event is of type %q, want Normal", ev.Type)
	}
	if s.proc != rolled {
		t.Fatal("serve was restarted")
	}
	if done, err := rolled.Exited(); done {
		t.Fatalf("serve exited: %v", err)
	}
	t.Logf("the upgrade, its refusal and the fix in %s", time.Since(started).Round(100*time.Millisecond))
}
