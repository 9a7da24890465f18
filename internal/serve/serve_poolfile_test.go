package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/pool"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
	"github.com/claimstream/claimstream/provider/rest"
)

// A bad pool file at start, with a log behind it (a pod rolled by a bad
// `helm upgrade`), does not take the provider down: serve answers the
// log's pool, says which file it did not apply and why (/readyz, still
// ready; the metric; the status ConfigMap; an Event on its Pod), and
// applies the next valid file. Both kinds of bad file: one that does not
// parse, and one the log refuses (maxSize below the live claims).
func TestServeKeepsTheLogsPoolWhenThePoolFileIsBadAtStart(t *testing.T) {
	const ns, podName = "claimstream", "claimstream-0"
	t.Setenv("POD_NAME", podName)
	t.Setenv("POD_NAMESPACE", ns)
	dir := t.TempDir()
	file := filepath.Join(dir, "pool.yaml")
	// The slots boot through a startup Job the fake never finishes: the
	// claims stay live.
	poolWith := func(maxSize int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "groups:\n  - name: rack\n    maxSize: %d\nslots:\n", maxSize)
		for i := 1; i <= 4; i++ {
			fmt.Fprintf(&b, "  - {name: n-%d, group: rack, startup: {podSpec: {restartPolicy: Never, containers: [{name: wake, image: busybox}]}}}\n", i)
		}
		return b.String()
	}
	fake := kube.NewFake()
	if _, err := fake.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := serveOptions{config: file, configPoll: 20 * time.Millisecond, dataDir: filepath.Join(dir, "data"), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		grpcAddress: freeAddr(t), plaintext: true, apiAddress: freeAddr(t), apiToken: "pool-file-token-0123456789abcdef0123", metricsAddress: freeAddr(t),
		cluster: clusterOptions{client: fake, namespace: ns, statusInterval: 20 * time.Millisecond}}
	ctx := context.Background()

	maxSize := func(c pb.CloudProviderClient) (int32, error) {
		gs, err := c.NodeGroups(ctx, &pb.NodeGroupsRequest{})
		if err != nil {
			return 0, err
		}
		if len(gs.NodeGroups) != 1 || gs.NodeGroups[0].Id != "rack" {
			return 0, fmt.Errorf("node groups %v, want rack alone", gs.NodeGroups)
		}
		return gs.NodeGroups[0].MaxSize, nil
	}
	readyz := func() (rest.Health, error) {
		code, body, err := getBody("http://" + o.apiAddress + "/readyz")
		if err != nil {
			return rest.Health{}, err
		}
		var h rest.Health
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			return h, fmt.Errorf("/readyz %d %s: %w", code, body, err)
		}
		if code != 200 || h.Status != "ready" {
			return h, fmt.Errorf("/readyz %d %s, want ready", code, body)
		}
		return h, nil
	}
	status := func() (kube.Status, error) {
		cm, err := fake.CoreV1().ConfigMaps(ns).Get(ctx, kube.StatusConfigMap, metav1.GetOptions{})
		if err != nil {
			return kube.Status{}, err
		}
		var st kube.Status
		err = yaml.Unmarshal([]byte(cm.Data[kube.StatusKey]), &st)
		return st, err
	}
	podEvents := func(reason string) (int, error) {
		evs, err := fake.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, e := range evs.Items {
			if e.Reason == reason && e.Regarding.Kind == "Pod" && e.Regarding.Name == podName {
				n++
			}
		}
		return n, nil
	}
	// refused checks every report of a file not applied for reason, while
	// the provider answers the log's pool of maxSize want.
	refused := func(c pb.CloudProviderClient, reason, errorHas string, want int32) {
		t.Helper()
		eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			if got, err := maxSize(c); err != nil || got != want {
				return fmt.Errorf("provider maxSize %d (%v), want the log's %d", got, err, want)
			}
			h, err := readyz()
			if err != nil {
				return err
			}
			if h.PoolFile == nil || h.PoolFile.Applied || h.PoolFile.Reason != reason || h.PoolFile.File != file || !strings.Contains(h.PoolFile.Error, errorHas) {
				return fmt.Errorf("/readyz poolFile %+v, want %s naming %q", h.PoolFile, reason, errorHas)
			}
			if v, err := scrapeValue(o.metricsAddress, "claimstream_pool_file_applied"); err != nil || v != "0" {
				return fmt.Errorf("claimstream_pool_file_applied %q (%v), want 0", v, err)
			}
			failures := `claimstream_pool_file_apply_failures_total{reason="` + reason + `"}`
			if v, err := scrapeValue(o.metricsAddress, failures); err != nil || v == "0" {
				return fmt.Errorf("%s %q (%v), want counted", failures, v, err)
			}
			st, err := status()
			if err != nil {
				return err
			}
			if st.PoolFile == nil || st.PoolFile.Applied || st.PoolFile.Reason != reason || !strings.Contains(st.PoolFile.Error, errorHas) {
				return fmt.Errorf("status ConfigMap poolFile %+v, want %s", st.PoolFile, reason)
			}
			if n, err := podEvents(kube.ReasonPoolFileRefused); err != nil || n == 0 {
				return fmt.Errorf("%d %s Events on Pod %s (%v)", n, kube.ReasonPoolFileRefused, podName, err)
			}
			return nil
		})
	}

	// A first start with a valid file, and two live claims.
	writeFile(t, file, poolWith(3))
	conn, stop := startServe(t, o)
	c := pb.NewCloudProviderClient(conn)
	if _, err := c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "rack", Delta: 2}); err != nil {
		t.Fatal(err)
	}
	stop()

	// A file that does not parse.
	writeFile(t, file, "groups:\n  - name: rack\n    maxSize: -1\n")
	conn, stop = startServe(t, o)
	refused(pb.NewCloudProviderClient(conn), pool.ReasonInvalid, "maxSize", 3)
	stop()

	// A valid file the log refuses: maxSize below the two live claims.
	writeFile(t, file, poolWith(1))
	conn, stop = startServe(t, o)
	defer stop()
	c = pb.NewCloudProviderClient(conn)
	refused(c, pool.ReasonRefused, "more than the new maxSize 1", 3)

	// The next valid file is applied, and every report says so.
	writeFile(t, file, poolWith(4))
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if got, err := maxSize(c); err != nil || got != 4 {
			return fmt.Errorf("provider maxSize %d (%v), want the new file's 4", got, err)
		}
		h, err := readyz()
		if err != nil {
			return err
		}
		if h.PoolFile != nil {
			return fmt.Errorf("/readyz still names the pool file: %+v", h.PoolFile)
		}
		if v, err := scrapeValue(o.metricsAddress, "claimstream_pool_file_applied"); err != nil || v != "1" {
			return fmt.Errorf("claimstream_pool_file_applied %q (%v), want 1", v, err)
		}
		st, err := status()
		if err != nil {
			return err
		}
		if st.PoolFile == nil || !st.PoolFile.Applied || st.PoolFile.Error != "" {
			return fmt.Errorf("status ConfigMap poolFile %+v, want applied", st.PoolFile)
		}
		if n, err := podEvents(kube.ReasonPoolFileApplied); err != nil || n == 0 {
			return fmt.Errorf("%d %s Events (%v)", n, kube.ReasonPoolFileApplied, err)
		}
		return nil
	})
}

// A replica that does not lead and found the pool file invalid at start
// reads it again when it changes: another invalid file is reported with
// its own error, and a file that loads clears the report (the leader
// applies it), so neither /readyz nor the metric go on naming a file
// that was fixed.
func TestAFollowerClearsItsReportOnceThePoolFileLoads(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pool.yaml")
	writeFile(t, file, "groups:\n  - name: rack\n    maxSize: -1\n")
	o := serveOptions{config: file, dataDir: filepath.Join(dir, "data"), stream: "CLAIMSTREAM", noFsync: true, logLevel: "error"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startTestPlane(t, ctx, o)
	if p.leads() {
		t.Fatal("the plane leads without an election")
	}
	_, err := loadPool(file)
	if err == nil {
		t.Fatal("the invalid file loads")
	}
	p.poolFileNotApplied(file, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.followPoolFile(ctx, file, 10*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()

	writeFile(t, file, "groups:\n  - name: Rack\n")
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if st := p.poolFile.State(); st == nil || st.Applied || !strings.Contains(st.Error, "name") || strings.Contains(st.Error, "maxSize") {
			return fmt.Errorf("report %+v, want the new file's error", st)
		}
		return nil
	})
	writeFile(t, file, "groups:\n  - name: rack\n")
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if st := p.poolFile.State(); st != nil {
			return fmt.Errorf("report %+v, want none once the file loads", st)
		}
		return nil
	})
}
