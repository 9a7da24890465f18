package suite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/deploy/e2e/machines"
	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// The recorded period of TestWhatIfReplaysARecordedPeriodFaithfully is the
// log of a serve of its own (its pool, namespace and data dir), so that
// the period starts quiet: no claim of another scenario wants a machine at
// its start (docs/whatif.md: those would be asked again in every run).
const (
	wiNamespace = "claimstream-e2e-whatif"
	wiGroup     = "whatif"
	wiAPIToken  = "e2e-whatif-api-token-0123456789abcdef"
)

var wiSlots = []string{"wi-1", "wi-2", "wi-3"}

const wiPool = `
groups:
  - name: whatif
    maxSize: 3
    readinessTaints: [{key: e2e.claimstream.dev/not-ready, effect: NoExecute}]
    lifecycle: {startupJobTimeout: 20s, registrationWait: 10s, readinessGate: 15s}
    template:
      capacity: {cpu: "8", memory: 32Gi, pods: "110"}
    cost: {powerWatts: 100, energyPricePerKWh: 0.30, currency: EUR}

slots:
  - name: wi-1
    group: whatif
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
  - {name: wi-2, group: whatif, startup: *power, shutdown: *power}
  - {name: wi-3, group: whatif, startup: *power, shutdown: *power}
`

// wiServer is the what-if scenario's serve and its clients.
type wiServer struct {
	proc     *testenv.Process
	provider pb.CloudProviderClient
	apiAddr  string
	model    *machines.Model
}

// wiOutcome and wiReport are what the test reads of the answer of POST
// /api/v1/whatif (the WhatIfReport of schemas/openapi.yaml).
type wiOutcome struct {
	Name           string        `json:"name"`
	Claims         int           `json:"claims"`
	MachineHours   float64       `json:"machineHours"`
	Boots          int           `json:"boots"`
	FailedBoots    int           `json:"failedBoots"`
	TimeToReadyP50 time.Duration `json:"timeToReadyP50"`
	TimeToReadyP95 time.Duration `json:"timeToReadyP95"`
	PeakMachines   int           `json:"peakMachines"`
}

type wiReport struct {
	LastSeq    uint64      `json:"lastSeq"`
	Recorded   wiOutcome   `json:"recorded"`
	Baseline   wiOutcome   `json:"baseline"`
	Candidates []wiOutcome `json:"candidates"`
	FellBack   []string    `json:"fellBack"`
	Requests   int         `json:"requests"`
}

// wiEvent is one line of GET /api/v1/events/export (a CloudEvent).
type wiEvent struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Subject  string          `json:"subject"`
	Time     time.Time       `json:"time"`
	Sequence string          `json:"sequence"`
	Claim    string          `json:"claim"`
	Data     json.RawMessage `json:"data"`
}

// kind is the catalog type of the event ("ClaimReady").
func (e wiEvent) kind() string {
	return strings.TrimSuffix(strings.TrimPrefix(e.Type, "dev.claimstream."), ".v1")
}

// call sends one request to the what-if server's REST API and returns the
// body of a 200 answer.
func (s *wiServer) call(t *testing.T, method, path string, body any, timeout time.Duration) []byte {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctxFor(t, timeout), method, "http://"+s.apiAddr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+wiAPIToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return b
}

// A period recorded against the real control plane (claims through their
// lifecycles on three slots: IncreaseSize, the machine model's boots,
// readiness, DeleteNodes, shutdown), replayed by `POST /api/v1/whatif`
// under the config it was recorded with, comes to the recorded outcome:
// the same claims and boots, machine-hours within 2%, and time-to-ready
// p50/p95 within the jitter of the machines as the log models them. The
// recorded log is the same (last sequence and digest) before and after.
func TestWhatIfReplaysARecordedPeriodFaithfully(t *testing.T) {
	// Its own serve, namespace, slots and data dir, and two minutes of
	// machines held up: it runs beside the other waiting tests.
	t.Parallel()
	s := startWhatIfServer(t)

	// The recorded period starts once the pool is declared: nothing is
	// live, nothing is up.
	from := time.Now().UTC()
	increase := func(delta int32) {
		t.Helper()
		if _, err := s.provider.NodeGroupIncreaseSize(ctxFor(t, 10*time.Second), &pb.NodeGroupIncreaseSizeRequest{Id: wiGroup, Delta: delta}); err != nil {
			t.Fatalf("IncreaseSize(%d): %v", delta, err)
		}
	}
	deleteNodes := func(slots ...string) {
		t.Helper()
		var nodes []*pb.ExternalGrpcNode
		for _, sl := range slots {
			nodes = append(nodes, &pb.ExternalGrpcNode{ProviderID: providerID(sl), Name: sl})
		}
		if _, err := s.provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{Id: wiGroup, Nodes: nodes}); err != nil {
			t.Fatalf("DeleteNodes(%v): %v", slots, err)
		}
	}
	running := func(n int) []string {
		t.Helper()
		var up []string
		waitT(t, 90*time.Second, fmt.Sprintf("%d instances running", n), func() (bool, string) {
			ins := s.instances(t)
			up = up[:0]
			for id, in := range ins {
				if in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning {
					up = append(up, strings.TrimPrefix(id, "homelab://"))
				}
			}
			slices.Sort(up)
			return len(up) == n && len(ins) == n, describeInstances(ins)
		})
		return up
	}
	// The machines' up-time is what the period records: long enough that
	// the report's rounding (a thousandth of an hour) stays well inside 2%.
	// hold waits until the cost report counts d more up-time for each slot.
	hold := func(d time.Duration, slots ...string) {
		t.Helper()
		path := "/api/v1/cost?by=slot&since=" + url.QueryEscape(from.Format(time.RFC3339Nano))
		upTime := func() map[string]float64 {
			var rep struct {
				Rows []struct {
					Key          string  `json:"key"`
					MachineHours float64 `json:"machineHours"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(s.call(t, http.MethodGet, path, nil, 10*time.Second), &rep); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			up := map[string]float64{}
			for _, r := range rep.Rows {
				up[r.Key] = r.MachineHours
			}
			return up
		}
		base := upTime()
		waitT(t, d+60*time.Second, fmt.Sprintf("%s more up-time counted for %v", d, slots), func() (bool, string) {
			up := upTime()
			for _, sl := range slots {
				if up[sl]-base[sl] < d.Hours() {
					return false, fmt.Sprintf("up-time %v, from %v", up, base)
				}
			}
			return true, ""
		})
	}
	offAndGone := func(slots ...string) {
		t.Helper()
		for _, sl := range slots {
			waitT(t, 60*time.Second, sl+" powered off and no longer an instance", func() (bool, string) {
				_, isInstance := s.instances(t)[providerID(sl)]
				return !s.model.On(sl) && !isInstance, describeInstances(s.instances(t))
			})
		}
	}

	increase(2)
	first := running(2)
	increase(1)
	third := running(3)
	hold(50*time.Second, third...)
	deleteNodes(first[0])
	offAndGone(first[0])
	increase(1)
	all := running(3)
	hold(50*time.Second, all...)
	deleteNodes(all...)
	offAndGone(all...)

	// The period ends once the log is quiet: the powered-off Nodes
	// deleted, every claim completed.
	lastSeq, digest := s.quietLog(t)
	to := time.Now().UTC()

	var rep wiReport
	body := map[string]any{"from": from, "to": to, "seed": 1, "candidates": []map[string]string{{"name": "same.yaml", "pool": wiPool}}}
	if err := json.Unmarshal(s.call(t, http.MethodPost, "/api/v1/whatif", body, 2*time.Minute), &rep); err != nil {
		t.Fatalf("POST /api/v1/whatif: %v", err)
	}
	if len(rep.Candidates) != 1 {
		t.Fatalf("POST /api/v1/whatif: %d candidate runs, want 1", len(rep.Candidates))
	}
	afterSeq, afterDigest := s.logDigest(t)
	if afterSeq != lastSeq || afterDigest != digest || rep.LastSeq != lastSeq {
		t.Errorf("the recorded log changed: last seq %d then %d (the what-if read %d), digest %s then %s", lastSeq, afterSeq, rep.LastSeq, digest, afterDigest)
	}

	rec := rep.Recorded
	t.Logf("recorded %+v", rec)
	t.Logf("baseline %+v", rep.Baseline)
	t.Logf("same.yaml %+v", rep.Candidates[0])
	t.Logf("fell back: %v", rep.FellBack)
	if rec.Claims != 4 || rec.Boots != 4 || rec.FailedBoots != 0 {
		t.Fatalf("the recording itself: %d claims, %d boots, %d failed; want 4, 4, 0", rec.Claims, rec.Boots, rec.FailedBoots)
	}
	if rep.Requests != 5 {
		t.Errorf("demand facts: %d requests, want 5 (3 IncreaseSize, 2 DeleteNodes)", rep.Requests)
	}
	jitter := s.modelledJitter(t, from, to)
	t.Logf("time-to-ready bound from the machines' model: %s", jitter)
	for _, o := range []wiOutcome{rep.Baseline, rep.Candidates[0]} {
		if o.Claims != rec.Claims || o.Boots != rec.Boots || o.FailedBoots != rec.FailedBoots {
			t.Errorf("%s: claims %d boots %d failed %d; recorded %d %d %d", o.Name, o.Claims, o.Boots, o.FailedBoots, rec.Claims, rec.Boots, rec.FailedBoots)
		}
		if diff := o.MachineHours/rec.MachineHours - 1; diff > 0.02 || diff < -0.02 {
			t.Errorf("%s: %.4f machine-hours, recorded %.4f (%+.2f%%, want within 2%%)", o.Name, o.MachineHours, rec.MachineHours, 100*diff)
		}
		for _, p := range []struct {
			name      string
			got, want time.Duration
		}{{"p50", o.TimeToReadyP50, rec.TimeToReadyP50}, {"p95", o.TimeToReadyP95, rec.TimeToReadyP95}} {
			if d := (p.got - p.want).Abs(); d > jitter {
				t.Errorf("%s: time to ready %s %s, recorded %s: %s apart, beyond the modelled jitter %s", o.Name, p.name, p.got, p.want, d, jitter)
			}
		}
	}
}

// startWhatIfServer starts the scenario's serve and machine model (its
// namespace's Jobs, its three slots) and waits until its provider knows
// the group and its pool is in the log. Everything stops with the test.
func startWhatIfServer(t *testing.T) *wiServer {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wiNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// After the server and the model have stopped (cleanups run last
		// in, first out).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, sl := range wiSlots {
			_ = admin.CoreV1().Nodes().Delete(ctx, sl, metav1.DeleteOptions{})
		}
		_ = admin.CoreV1().Namespaces().Delete(ctx, wiNamespace, metav1.DeleteOptions{})
	})
	waitT(t, 60*time.Second, "namespace "+wiNamespace+" has its default ServiceAccount", func() (bool, string) {
		_, err := admin.CoreV1().ServiceAccounts(wiNamespace).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})

	dir := filepath.Join(env.Dir, "whatif")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(env.Dir, "logs", "machines-whatif.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	var slots []machines.Slot
	for _, sl := range wiSlots {
		slots = append(slots, machines.Slot{
			Name: sl,
			// The shared server sees Nodes of a group it does not manage.
			Labels:          map[string]string{"claimstream.dev/group": wiGroup},
			ReadinessTaints: []corev1.Taint{{Key: readyTaint, Effect: corev1.TaintEffectNoExecute}},
		})
	}
	s := &wiServer{model: machines.New(admin, wiNamespace, slots, machines.Knobs{BootDelay: time.Second, ReadyDelay: 3 * time.Second}, slog.New(slog.NewTextHandler(logf, nil)))}
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	go func() { defer close(mdone); _ = s.model.Run(mctx) }()
	t.Cleanup(func() { mcancel(); <-mdone })

	pool := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(pool, []byte(wiPool), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := testenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	grpcAddr, apiAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	args := []string{"serve",
		"--config", pool, "--config-poll", "1h",
		"--kubeconfig", env.Kubeconfig,
		"--namespace", wiNamespace,
		"--leader-elect=false",
		"--data-dir", filepath.Join(dir, "data"),
		"--grpc-address", grpcAddr, "--plaintext",
		"--api-address", apiAddr, "--api-token", wiAPIToken,
		"--metrics-address=",
		"--log-level=debug",
	}
	s.proc, err = testenv.StartProcess("claimstream-whatif", server.Bin, args, filepath.Join(env.Dir, "logs"), nil)
	if err != nil {
		t.Fatal(err)
	}
	allPids = append(allPids, s.proc.Pid())
	t.Cleanup(func() { s.proc.Stop(10 * time.Second) })
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Log("\n--- claimstream-whatif log tail ---\n" + testenv.TailFile(s.proc.LogPath, 6000))
		var b strings.Builder
		for _, e := range s.model.Events() {
			fmt.Fprintf(&b, "%s %s %s %s\n", e.At.Format("15:04:05.000"), e.Slot, e.What, e.Job)
		}
		t.Logf("machine events:\n%s", b.String())
	})
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.provider = pb.NewCloudProviderClient(conn)
	s.apiAddr = apiAddr
	waitT(t, 90*time.Second, "the what-if server's provider knows its group, its pool in the log", func() (bool, string) {
		if done, err := s.proc.Exited(); done {
			t.Fatalf("the what-if server exited: %v\n%s", err, testenv.TailFile(s.proc.LogPath, 4000))
		}
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		r, err := s.provider.NodeGroups(c, &pb.NodeGroupsRequest{})
		if err != nil {
			return false, err.Error()
		}
		if len(r.GetNodeGroups()) != 1 || r.GetNodeGroups()[0].GetId() != wiGroup {
			return false, fmt.Sprintf("groups %v", r.GetNodeGroups())
		}
		return true, ""
	})
	s.quietLog(t)
	return s
}

func (s *wiServer) instances(t *testing.T) map[string]*pb.Instance {
	t.Helper()
	r, err := s.provider.NodeGroupNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupNodesRequest{Id: wiGroup})
	if err != nil {
		t.Fatalf("NodeGroupNodes(%s): %v", wiGroup, err)
	}
	out := map[string]*pb.Instance{}
	for _, in := range r.GetInstances() {
		out[in.GetId()] = in
	}
	return out
}

// export is the server's whole log (GET /api/v1/events/export).
func (s *wiServer) export(t *testing.T) []wiEvent {
	t.Helper()
	var out []wiEvent
	for line := range strings.Lines(string(s.call(t, http.MethodGet, "/api/v1/events/export", nil, 20*time.Second))) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e wiEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// logDigest is the log's last sequence and a digest of all its events.
func (s *wiServer) logDigest(t *testing.T) (uint64, string) {
	t.Helper()
	evs := s.export(t)
	h := sha256.New()
	var last uint64
	for _, e := range evs {
		seq, err := strconv.ParseUint(e.Sequence, 10, 64)
		if err != nil {
			t.Fatalf("event %s: sequence %q: %v", e.ID, e.Sequence, err)
		}
		last = seq
		fmt.Fprintf(h, "%d %s %s %s %s %s\n", seq, e.ID, e.Type, e.Subject, e.Time.Format(time.RFC3339Nano), e.Data)
	}
	return last, fmt.Sprintf("%x", h.Sum(nil))
}

// quietLog waits until the log has not grown for 3 seconds and returns
// its last sequence and digest.
func (s *wiServer) quietLog(t *testing.T) (uint64, string) {
	t.Helper()
	var last uint64
	var digest string
	var since time.Time
	waitT(t, 60*time.Second, "the what-if server's log quiet for 3s", func() (bool, string) {
		l, d := s.logDigest(t)
		if l != last || d != digest {
			last, digest, since = l, d, time.Now()
		}
		return time.Since(since) >= 3*time.Second, fmt.Sprintf("last seq %d", last)
	})
	return last, digest
}

// modelledJitter bounds how far a replayed time-to-ready percentile may be
// from the recorded one, from what the replay models of the recorded log.
// A claim's time to ready is its wait for a boot (ClaimCreated to
// ClaimBooting), its boot (ClaimBooting to MachinePoweredOn's instant) and
// its readiness gate (that instant to ClaimReady). The replay draws each
// boot and each gate from the recorded ones and starts a boot in the pass
// that creates the claim: each replayed claim is within the spread of the
// boots plus the spread of the gates plus the longest recorded wait of the
// recorded claim it replays, and so is every nearest-rank percentile.
func (s *wiServer) modelledJitter(t *testing.T, from, to time.Time) time.Duration {
	t.Helper()
	type claim struct{ created, booting, on, ready time.Time }
	claims := map[string]*claim{}
	of := func(name string) *claim {
		if claims[name] == nil {
			claims[name] = &claim{}
		}
		return claims[name]
	}
	for _, e := range s.export(t) {
		if e.Time.Before(from) || !e.Time.Before(to) {
			continue
		}
		switch e.kind() {
		case "ClaimCreated":
			of(e.Claim).created = e.Time
		case "ClaimBooting":
			of(e.Claim).booting = e.Time
		case "ClaimReady":
			of(e.Claim).ready = e.Time
		case "MachinePoweredOn":
			var d struct {
				Claim string    `json:"claim"`
				At    time.Time `json:"at"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatalf("MachinePoweredOn %s: %v", e.Data, err)
			}
			if d.Claim != "" {
				of(d.Claim).on = d.At
			}
		}
	}
	var waits, boots, gates []time.Duration
	for name, c := range claims {
		if c.created.IsZero() || c.booting.IsZero() || c.on.IsZero() || c.ready.IsZero() {
			t.Fatalf("claim %s: created %s, booting %s, on %s, ready %s: want all four in the period", name, c.created, c.booting, c.on, c.ready)
		}
		waits = append(waits, c.booting.Sub(c.created))
		boots = append(boots, c.on.Sub(c.booting))
		gates = append(gates, c.ready.Sub(c.on))
	}
	t.Logf("recorded claims: waits %v, boots %v, gates %v", waits, boots, gates)
	spread := func(ds []time.Duration) time.Duration { return slices.Max(ds) - slices.Min(ds) }
	return spread(boots) + spread(gates) + slices.Max(waits)
}
