package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// threeReplicas starts three serve processes on loopback sharing one log
// (the arguments of TestProcessThreeServeReplicasShareOneLog), each with its own
// provider and REST API; they die with the test. extra are more serve
// arguments for each.
func threeReplicas(t testing.TB, extra ...string) []*replicaProc {
	t.Helper()
	replicas := newThreeReplicas(t, extra...)
	for _, r := range replicas {
		r.start()
	}
	return replicas
}

// newThreeReplicas is threeReplicas with none started yet: a test may add
// arguments of one replica's own first.
func newThreeReplicas(t testing.TB, extra ...string) []*replicaProc {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "route-secret")
	writeFile(t, secret, "three-replicas-secret\n")
	routes := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var replicas []*replicaProc
	for i := range 3 {
		r := &replicaProc{t: t, name: fmt.Sprintf("claimstream-%d", i), api: freeAddr(t), grpc: freeAddr(t)}
		r.args = []string{"serve",
			"--config", examplePool, "--config-poll", "1h",
			"--data-dir", filepath.Join(t.TempDir(), "data"),
			"--replica-name", r.name, "--replicas", "3",
			"--nats-cluster-listen", routes[i],
			"--nats-routes", "nats-route://" + strings.Join(routes, ",nats-route://"),
			"--nats-cluster-password-file", secret,
			"--grpc-address", r.grpc, "--plaintext",
			"--api-address", r.api, "--api-token", replicaAPIToken,
			"--metrics-address=", "--no-fsync", "--log-level", "info",
		}
		r.args = append(r.args, extra...)
		replicas = append(replicas, r)
	}
	t.Cleanup(func() {
		for _, r := range replicas {
			r.signal(syscall.SIGKILL)
		}
		if t.Failed() {
			for _, r := range replicas {
				t.Logf("%s's log, its last lines:\n%s", r.name, lastLines(r.logText(), 60))
			}
		}
	})
	return replicas
}

// exported is one event of GET /api/v1/events/export.
type exported struct {
	Type        string          `json:"type"`
	Sequence    string          `json:"sequence"`
	LeaderEpoch string          `json:"leaderepoch"`
	Data        json.RawMessage `json:"data"`
}

func (r *replicaProc) export() ([]exported, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.api+"/api/v1/events/export", nil)
	req.Header.Set("Authorization", "Bearer "+replicaAPIToken)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return nil, fmt.Errorf("%s export: %d %s (Retry-After %q)", r.name, resp.StatusCode, body.Error, resp.Header.Get("Retry-After"))
	}
	var out []exported
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e exported
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s export: %w", r.name, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// toggleSlot decommissions (or recommissions) slot through the REST API:
// the probe of "a leader accepts writes". The first decommission of a
// slot appends; one of a slot already decommissioned is acknowledged and
// appends nothing.
func (r *replicaProc) toggleSlot(slot string, on bool) error {
	verb := "decommission"
	if on {
		verb = "recommission"
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.api+"/api/v1/slots/"+slot+"/"+verb, strings.NewReader(`{"by":"failover-test"}`))
	req.Header.Set("Authorization", "Bearer "+replicaAPIToken)
	req.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var body struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return fmt.Errorf("%s %s: %d %s", r.name, verb, resp.StatusCode, body.Error)
	}
	return nil
}

func (r *replicaProc) targetSize(group string) (int32, error) {
	var size int32
	err := r.callProvider(ctx10s, func(ctx context.Context, c pb.CloudProviderClient) error {
		res, err := c.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: group})
		size = res.GetTargetSize()
		return err
	})
	return size, err
}

func (r *replicaProc) deleteNode(node string) error {
	return r.callProvider(ctx10s, func(ctx context.Context, c pb.CloudProviderClient) error {
		_, err := c.NodeGroupDeleteNodes(ctx, &pb.NodeGroupDeleteNodesRequest{Id: "homelab", Nodes: []*pb.ExternalGrpcNode{{Name: node, ProviderID: "homelab://" + node}}})
		return err
	})
}

type liveClaim struct {
	Name, Slot, Phase string
}

func (r *replicaProc) claims() ([]liveClaim, error) {
	var l struct{ Items []liveClaim }
	if _, err := r.get("/api/v1/claims", &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// checkLog holds for every replica's export: at most one live claim per
// slot at every point of the log, and the epochs of LeaderElected grow by
// one. It returns the export.
func checkLog(t testing.TB, r *replicaProc) []exported {
	t.Helper()
	evs, err := r.export()
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]string{} // slot -> live claim
	var epoch uint64
	for _, e := range evs {
		var d struct {
			Claim, Slot string
			Epoch       uint64
		}
		_ = json.Unmarshal(e.Data, &d)
		switch e.Type {
		case "dev.claimstream.ClaimCreated.v1":
			if c := live[d.Slot]; c != "" {
				t.Fatalf("seq %s: claim %s on slot %s while %s is live", e.Sequence, d.Claim, d.Slot, c)
			}
			live[d.Slot] = d.Claim
		case "dev.claimstream.ClaimFailed.v1", "dev.claimstream.ClaimCompleted.v1", "dev.claimstream.ClaimCancelled.v1":
			if live[d.Slot] == d.Claim {
				delete(live, d.Slot)
			}
		case "dev.claimstream.LeaderElected.v1":
			if d.Epoch != epoch+1 {
				t.Fatalf("seq %s: LeaderElected epoch %d after epoch %d", e.Sequence, d.Epoch, epoch)
			}
			epoch = d.Epoch
		}
	}
	return evs
}

// Three replicas under writes. SIGSTOP of the leader past its lease:
// another leads, and after SIGCONT the stalled one appends nothing. Then
// kill -9 of the new leader: a leader again within the lease and one
// reconcile, no acknowledged call lost, at most one live claim per slot at
// every point of the log, and the survivors' cluster-autoscaler reads
// agree.
func TestProcessLeaderFailoverOfThreeReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three serve processes")
	}
	replicas := newThreeReplicas(t)
	metrics := map[*replicaProc]string{}
	for _, r := range replicas {
		metrics[r] = freeAddr(t)
		r.args = append(r.args, "--metrics-address", metrics[r])
		r.start()
	}
	sameLog(t, replicas)
	first := leaderOf(t, replicas)
	// Every provider answers once the pool is in its views.
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		for _, r := range replicas {
			if _, err := r.targetSize("homelab"); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
		}
		return nil
	})

	// A burst of IncreaseSize through every provider: followers refuse
	// (Unavailable, naming the leader), the leader acknowledges.
	acked := 0
	for range 3 {
		for _, r := range replicas {
			err := r.increase(1)
			switch {
			case err == nil:
				acked++
			case strings.Contains(err.Error(), "too large"):
				// The group is full: refused by the decision on any replica.
			case r != first && !strings.Contains(err.Error(), "not the leader: "+first.name):
				t.Fatalf("follower %s: %v", r.name, err)
			case r == first:
				t.Fatalf("leader %s: %v", r.name, err)
			}
		}
	}
	if acked == 0 {
		t.Fatal("the leader acknowledged no IncreaseSize")
	}
	// And DeleteNodes of one claimed node through every provider: only
	// the leader's call writes; the others name the leader.
	burst, cerr := first.claims()
	if cerr != nil || len(burst) == 0 {
		t.Fatalf("claims: %v %v", burst, cerr)
	}
	deleted := 0
	for _, r := range replicas {
		err := r.deleteNode(burst[0].Slot)
		switch {
		case err == nil:
			deleted++
		case r != first && strings.Contains(err.Error(), "not the leader: "+first.name):
		default:
			t.Fatalf("DeleteNodes on %s: %v", r.name, err)
		}
	}
	if deleted == 0 {
		t.Fatal("no DeleteNodes acknowledged")
	}
	sameLog(t, replicas)

	// SIGSTOP of the leader past its lease.
	if err := syscall.Kill(-first.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	others := without(replicas, first)
	eventstest.CheckFor(t, 90*time.Second, 50*time.Millisecond, func() error {
		for _, r := range others {
			if err := r.toggleSlot("node-3.lan", false); err == nil {
				return nil
			}
		}
		return errors.New("no leader among the running replicas yet")
	})
	t.Logf("a stopped leader replaced (first acknowledged write) in %s", time.Since(stoppedAt).Round(time.Millisecond))
	second := leaderOf(t, others)
	if err := syscall.Kill(-first.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The resumed one gives up the lead, and writes nothing.
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if !strings.Contains(first.logText(), "lost leadership") {
			return errors.New("the resumed leader has not logged its loss yet")
		}
		return nil
	})
	before := sameLog(t, replicas)
	onlyEpochAfterElection(t, checkLog(t, second))

	// The leader elected while the first was stopped hands the streams'
	// leadership away once every replica is back: wait for that state,
	// the one the failover's bound below is for (a kill before it costs a
	// JetStream election, up to 9s more).
	handing := time.Now()
	eventstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		for _, inst := range []string{"claimstream_log_stream_leader", "claimstream_lease_stream_leader"} {
			v, err := scrapeValue(metrics[second], inst)
			if err != nil {
				return err
			}
			if v != "0" {
				return fmt.Errorf("%s %s on the leader %s", inst, v, second.name)
			}
		}
		return nil
	})
	t.Logf("the streams' leadership left the leader's server %s after the resumed replica's loss", time.Since(handing).Round(time.Millisecond))

	// kill -9 of the leader.
	killedAt := time.Now()
	second.signal(syscall.SIGKILL)
	survivors := without(replicas, second)
	var failover time.Duration
	eventstest.CheckFor(t, 90*time.Second, 50*time.Millisecond, func() error {
		var errs []error
		for _, r := range survivors {
			if err := r.toggleSlot("node-3.lan", true); err != nil {
				errs = append(errs, err)
				continue
			}
			failover = time.Since(killedAt)
			return nil
		}
		return errors.Join(errs...)
	})
	t.Logf("failover: kill -9 of the leader to the first acknowledged write on the new leader: %s", failover.Round(time.Millisecond))
	// The lease (4s on the survivor's clock from when it last saw the
	// lease change) + a retry period + the election's append: no JetStream
	// election stands in the way (the streams' leaders are elsewhere, the
	// views read their writes directly).
	if failover > 10*time.Second {
		t.Errorf("failover took %s, want within the 4s lease, a retry period and the election's append", failover)
	}
	third := leaderOf(t, survivors)
	after := sameLog(t, survivors)
	if after.Last <= before.Last {
		t.Fatalf("no write after the failover: %d, was %d", after.Last, before.Last)
	}
	// No acknowledged claim lost; one live claim per slot in the views.
	cls, err := third.claims()
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]string{}
	for _, c := range cls {
		if c.Phase != "completed" && c.Phase != "failed" {
			if o := live[c.Slot]; o != "" {
				t.Fatalf("slot %s has live claims %s and %s", c.Slot, o, c.Name)
			}
			live[c.Slot] = c.Name
		}
	}
	if len(cls) < acked {
		t.Fatalf("%d claims in the views, %d IncreaseSize acknowledged", len(cls), acked)
	}
	// cluster-autoscaler's reads on the survivors agree.
	eventstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		var sizes []int32
		for _, r := range survivors {
			n, err := r.targetSize("homelab")
			if err != nil {
				return err
			}
			sizes = append(sizes, n)
		}
		if sizes[0] != sizes[1] {
			return fmt.Errorf("TargetSize %v", sizes)
		}
		return nil
	})
	evs := checkLog(t, third)
	onlyEpochAfterElection(t, evs)
	last := ""
	for _, e := range evs {
		if e.Type == "dev.claimstream.LeaderElected.v1" {
			last = e.LeaderEpoch
		}
	}
	if n, _ := strconv.ParseUint(last, 10, 64); n < 3 {
		t.Fatalf("last epoch %s, want 3 or more (three elections)", last)
	}

	// The third leader was elected with a replica down, when handing the
	// log's stream away protects nothing; once all three are back, the
	// stream is led by another server than the leader's.
	second.start()
	sameLog(t, replicas)
	eventstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		led := map[string]string{}
		for _, r := range replicas {
			v, err := scrapeValue(metrics[r], "claimstream_log_stream_leader")
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			led[r.name] = v
		}
		if led[third.name] != "0" {
			return fmt.Errorf("the log's stream is still led by the claimstream leader %s's server (%v)", third.name, led)
		}
		return nil
	})
	// The pool's view metrics are on the leader's scrape only, so an alert
	// on them sees one series, not three.
	eventstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		for _, r := range replicas {
			b, err := scrapeMetrics(metrics[r])
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if has := strings.Contains(b, "\nclaimstream_slots{"); has != (r == third) {
				return fmt.Errorf("%s (leader %s) exports claimstream_slots: %v", r.name, third.name, has)
			}
		}
		return nil
	})
}

// scrapeMetrics is the scrape endpoint's page at addr.
func scrapeMetrics(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// scrapeValue is the value of a metric without labels on the scrape
// endpoint at addr.
func scrapeValue(addr, name string) (string, error) {
	b, err := scrapeMetrics(addr)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(b, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no %s on the scrape", name)
}

// onlyEpochAfterElection: every event after a LeaderElected carries that
// epoch until the next one: a deposed leader wrote nothing.
func onlyEpochAfterElection(t testing.TB, evs []exported) {
	t.Helper()
	epoch := ""
	for _, e := range evs {
		if e.Type == "dev.claimstream.LeaderElected.v1" {
			epoch = e.LeaderEpoch
			continue
		}
		if epoch != "" && e.LeaderEpoch != epoch {
			t.Fatalf("seq %s (%s) written with epoch %q after epoch %s was elected", e.Sequence, e.Type, e.LeaderEpoch, epoch)
		}
	}
}

func without(rs []*replicaProc, x *replicaProc) []*replicaProc {
	var out []*replicaProc
	for _, r := range rs {
		if r != x {
			out = append(out, r)
		}
	}
	return out
}
