package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events/eventstest"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// stormDefault is the storm's length in a plain `go test`; set
// CLAIMSTREAM_STORM to a duration (10m) for the long run.
const stormDefault = 40 * time.Second

// TestProcessStormOfThreeReplicas: three serve processes under IncreaseSize and
// DecreaseTargetSize calls on every replica, while a random replica
// (mostly the leader) is killed with SIGKILL or stopped with SIGSTOP every
// few seconds and brought back a few seconds later. Then, from the log
// one replica exports: every acknowledged IncreaseSize has its claim, no
// refused one has any, at most one live claim per slot at every prefix,
// no event of an older epoch after a newer LeaderElected, no gap; the
// cluster still takes writes, and all replicas stop with the same views.
//
//	go test ./internal/serve -run TestProcessStormOfThreeReplicas -v
//	CLAIMSTREAM_STORM=10m go test ./internal/serve -run TestProcessStormOfThreeReplicas -v -timeout 30m
func TestProcessStormOfThreeReplicas(t *testing.T) {
	length := envDuration(t, "CLAIMSTREAM_STORM", stormDefault)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CLAIMSTREAM_STORM_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("storm of %s, seed %d (CLAIMSTREAM_STORM_SEED)", length, seed)
	rng := mrand.New(mrand.NewPCG(seed, seed))

	// The simulated machines boot and shut down twenty times faster, so
	// that claims end and slots free up for new ones within the storm.
	replicas := threeReplicas(t, "--speed", "20", "--config", stormPool(t, stormSlots))
	sameLog(t, replicas)
	var rep stormReport
	ctx, cancel := context.WithTimeout(context.Background(), length)
	defer cancel()
	var wg sync.WaitGroup
	stormLoad(ctx, &wg, replicas, seed, &rep)

	chaos := newChaos(t, replicas, rng, &rep)
	chaos.run(ctx)
	wg.Wait()
	chaos.heal()

	sameLog(t, replicas)
	// Serving at the end: a leader takes a write (one that always appends,
	// whatever the group's size).
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		var errs []error
		for _, r := range replicas {
			if err := r.toggleSlot("node-3.lan", false); err != nil {
				errs = append(errs, err)
				continue
			}
			return nil
		}
		return errors.Join(errs...)
	})
	sameLog(t, replicas)
	evs := checkLog(t, replicas[0])
	onlyEpochAfterElection(t, evs)
	rep.check(t, evs)
	t.Logf("storm: %s", rep.summary(evs, length))

	// The same views everywhere, not only the same claims: once the log is
	// quiet, every replica stops at its end with the same views' digest.
	stopAllAtTheEnd(t, replicas, quiet(t, replicas).Last)
}

// envDuration is the duration the environment variable name gives, or
// def when it is unset.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// stormSlots is how many machines the storm's group has: enough that
// most IncreaseSize calls find a free slot while claims come and go.
const stormSlots = 12

// stormProbeSlot is the slot of the probe group, whose decommissions
// time the failovers.
const stormProbeSlot = "probe-1"

// stormPool writes a pool of one cluster-autoscaler group, homelab, of n
// slots node-1.lan to node-<n>.lan, and the probe group of one slot, and
// returns its path.
func stormPool(t testing.TB, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("groups:\n  - name: homelab\n    readinessTaints: []\n    template:\n      capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n")
	b.WriteString("  - name: probe\n    template:\n      capacity: {cpu: \"1\", memory: 1Gi, pods: \"10\"}\nslots:\n")
	fmt.Fprintf(&b, "  - name: %s\n    group: probe\n    startup:\n      podSpec: {restartPolicy: Never, containers: [{name: wake, image: busybox:1.37}]}\n    shutdown:\n      podSpec: {restartPolicy: Never, containers: [{name: halt, image: busybox:1.37}]}\n", stormProbeSlot)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - name: node-%d.lan\n    group: homelab\n    startup:\n      podSpec: {restartPolicy: Never, containers: [{name: wake, image: busybox:1.37}]}\n    shutdown:\n      podSpec: {restartPolicy: Never, containers: [{name: halt, image: busybox:1.37}]}\n", i)
	}
	p := filepath.Join(t.TempDir(), "storm-pool.yaml")
	writeFile(t, p, b.String())
	return p
}

// stormLoad starts the load on every replica until ctx ends: three
// workers calling IncreaseSize (traced, so the log names each request),
// DecreaseTargetSize and DeleteNodes on a random replica, and one reader
// of the REST API's log reads (events, export, cost, audit), each a
// reader of the log with a consumer of its own. wg waits for them.
func stormLoad(ctx context.Context, wg *sync.WaitGroup, replicas []*replicaProc, seed uint64, rep *stormReport) {
	pause := func(rng *mrand.Rand, from, upTo int) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(from+rng.IntN(upTo-from)) * time.Millisecond):
		}
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wrng := mrand.New(mrand.NewPCG(seed, uint64(w)+1))
			for ctx.Err() == nil {
				r := replicas[wrng.IntN(len(replicas))]
				switch wrng.IntN(4) {
				case 0:
					rep.other("DecreaseTargetSize", r.decreaseTarget())
					continue
				case 1:
					// cluster-autoscaler deletes nodes it sees up: a
					// Ready claim's, so that its slot frees for the next.
					if slot := r.readySlot(wrng); slot != "" {
						rep.other("DeleteNodes", r.deleteNode(slot))
					}
					continue
				}
				key, err := r.increaseTraced()
				rep.call(key, err)
				pause(wrng, 50, 200)
			}
		}()
	}
	// The probe: a decommission or recommission of the probe group's slot,
	// every 100 ms on a random replica, each the other way from the last
	// acknowledged: how soon a new leader takes writes. Only those that
	// appended (or may have) are checked against the log.
	wg.Add(1)
	go func() {
		defer wg.Done()
		prng := mrand.New(mrand.NewPCG(seed, 98))
		decommission := true
		for n := 0; ctx.Err() == nil; n++ {
			id := fmt.Sprintf("probe %d", n)
			appended, refused, err := replicas[prng.IntN(len(replicas))].probeWrite(id, decommission)
			if err == nil {
				// Appended, or the slot was in that state already (an
				// unknown outcome before landed): the other way next.
				decommission = !decommission
			}
			if err != nil || appended {
				rep.probed(id, refused, err)
			}
			pause(prng, 100, 101)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		rrng := mrand.New(mrand.NewPCG(seed, 99))
		reads := []string{"/api/v1/events?last=50", "/api/v1/events/export?last=200", "/api/v1/cost?by=slot", "/api/v1/audit/slots/node-1.lan", "/api/v1/timeline"}
		for ctx.Err() == nil {
			r := replicas[rrng.IntN(len(replicas))]
			code, err := r.read(reads[rrng.IntN(len(reads))])
			what := "GET " + strconv.Itoa(code)
			if err != nil {
				what = "GET error"
			}
			rep.count(what)
			pause(rrng, 20, 100)
		}
	}()
}

// probeWrite decommissions (or recommissions) the probe slot by id.
// appended: the answer lists the events written; refused: the replica
// answered that it is not the leader, so nothing was written.
func (r *replicaProc) probeWrite(id string, decommission bool) (appended, refused bool, err error) {
	verb := "recommission"
	if decommission {
		verb = "decommission"
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.api+"/api/v1/slots/"+stormProbeSlot+"/"+verb, strings.NewReader(fmt.Sprintf(`{"by":%q}`, id)))
	req.Header.Set("Authorization", "Bearer "+replicaAPIToken)
	req.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	var answer struct {
		Error  string
		Events []json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return false, false, fmt.Errorf("%s %s: %d, %w", r.name, verb, resp.StatusCode, err)
	}
	if resp.StatusCode/100 == 2 {
		return len(answer.Events) > 0, false, nil
	}
	return false, strings.HasPrefix(answer.Error, "not the leader"), fmt.Errorf("%s %s: %d %s", r.name, verb, resp.StatusCode, answer.Error)
}

// readySlot is the slot of one of the replica's Ready claims, or "".
func (r *replicaProc) readySlot(rng *mrand.Rand) string {
	cs, err := r.claims()
	if err != nil {
		return ""
	}
	var ready []string
	for _, c := range cs {
		if c.Phase == "ready" {
			ready = append(ready, c.Slot)
		}
	}
	if len(ready) == 0 {
		return ""
	}
	return ready[rng.IntN(len(ready))]
}

// read GETs path, reads the whole answer and returns its status.
func (r *replicaProc) read(path string) (int, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+replicaAPIToken)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// stormReport is what the load and the chaos saw.
type stormReport struct {
	mu                 sync.Mutex
	acked, refused     []string // request keys
	unknown            int
	kills, stops       int
	leaderDowns        []time.Time // when a leader was killed or stopped
	firstAckAfterDowns []time.Duration
	calls              int
	okCalls            int
	probes, probesOK   int // writes that always append, to time failovers
	probesAcked        []string
	probesRefused      []string
	why                map[string]int // refusals and unknowns, by their first words
	others             map[string]int // the other calls' answers, by code
}

// call records one IncreaseSize: acknowledged, refused with nothing
// written, or of unknown outcome (the replica died or stopped under it,
// or it said so).
func (r *stormReport) call(key string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	switch {
	case err == nil:
		r.okCalls++
		r.acked = append(r.acked, key)
		r.acknowledged(time.Now())
	case refusedCleanly(err):
		r.refused = append(r.refused, key)
		r.note(err)
	default:
		r.unknown++
		r.note(err)
	}
}

// acknowledged is a write acknowledged at now: the first after each
// leader that went down since the last one ends that outage. Under r.mu.
func (r *stormReport) acknowledged(now time.Time) {
	for len(r.firstAckAfterDowns) < len(r.leaderDowns) {
		r.firstAckAfterDowns = append(r.firstAckAfterDowns, now.Sub(r.leaderDowns[len(r.firstAckAfterDowns)]))
	}
}

// probed records the answer of the probe write id: acknowledged (err
// nil), refused with nothing written, or of unknown outcome.
func (r *stormReport) probed(id string, refused bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probes++
	switch {
	case err == nil:
		r.probesOK++
		r.probesAcked = append(r.probesAcked, id)
		r.acknowledged(time.Now())
	case refused:
		r.probesRefused = append(r.probesRefused, id)
	}
}

// other records the answer of a call the checks do not follow.
func (r *stormReport) other(call string, err error) {
	what := "ok"
	if s, ok := status.FromError(err); err != nil && ok {
		what = s.Code().String()
	} else if err != nil {
		what = "error"
	}
	r.count(call + " " + what)
}

// count adds one to the answers of the calls the checks do not follow.
func (r *stormReport) count(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.others == nil {
		r.others = map[string]int{}
	}
	r.others[what]++
}

func (r *stormReport) note(err error) {
	if r.why == nil {
		r.why = map[string]int{}
	}
	msg := err.Error()
	if s, ok := status.FromError(err); ok {
		msg = s.Code().String() + ": " + s.Message()
	}
	if f := strings.Fields(msg); len(f) > 8 {
		msg = strings.Join(f[:8], " ")
	}
	r.why[msg]++
}

// refusedCleanly: the server answered with a refusal that writes nothing:
// not the leader, over a bound, a bad argument. A transport error or a
// deadline is not an answer, and Unknown says the outcome is unknown.
func refusedCleanly(err error) bool {
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch s.Code() {
	case codes.FailedPrecondition, codes.InvalidArgument, codes.OutOfRange, codes.ResourceExhausted:
		return true
	case codes.Unavailable:
		return strings.HasPrefix(s.Message(), "not the leader")
	}
	return false
}

// check holds the log to what the callers were told.
func (r *stormReport) check(t *testing.T, evs []exported) {
	t.Helper()
	created := map[string]int{}
	var prev uint64
	for _, e := range evs {
		seq, _ := strconv.ParseUint(e.Sequence, 10, 64)
		if seq != prev+1 {
			t.Errorf("the log skips from seq %d to %d", prev, seq)
		}
		prev = seq
		if e.Type != "dev.claimstream.ClaimCreated.v1" && e.Type != "dev.claimstream.SizeIncreased.v1" {
			continue
		}
		var d struct {
			Attempt int
			Request struct{ Key string }
		}
		_ = json.Unmarshal(e.Data, &d)
		// A retry of a failed boot is a new attempt of the same request.
		if e.Type == "dev.claimstream.ClaimCreated.v1" && d.Attempt == 1 {
			created[d.Request.Key]++
		}
	}
	probes := map[string]int{}
	for _, e := range evs {
		if e.Type == "dev.claimstream.SlotDecommissioned.v1" || e.Type == "dev.claimstream.SlotRecommissioned.v1" {
			var d struct{ By string }
			_ = json.Unmarshal(e.Data, &d)
			probes[d.By]++
		}
	}
	for _, id := range r.probesAcked {
		if probes[id] != 1 {
			t.Errorf("acknowledged probe write %q is in the log %d times, want 1", id, probes[id])
		}
	}
	for _, id := range r.probesRefused {
		if probes[id] != 0 {
			t.Errorf("refused probe write %q is in the log %d times", id, probes[id])
		}
	}
	for _, k := range r.acked {
		if created[k] != 1 {
			t.Errorf("acknowledged IncreaseSize %q has %d claims in the log, want 1", k, created[k])
		}
	}
	for _, k := range r.refused {
		if created[k] != 0 {
			t.Errorf("refused IncreaseSize %q has %d claims in the log", k, created[k])
		}
	}
}

// summary is the storm's figures over a run of length; "serving" is the
// share of it outside the gaps from a leader going down to the next
// acknowledged write.
func (r *stormReport) summary(evs []exported, length time.Duration) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	epochs := 0
	for _, e := range evs {
		if e.Type == "dev.claimstream.LeaderElected.v1" {
			epochs++
		}
	}
	fo := slices.Clone(r.firstAckAfterDowns)
	slices.Sort(fo)
	p50, worst, down := time.Duration(0), time.Duration(0), time.Duration(0)
	if len(fo) > 0 {
		p50, worst = fo[len(fo)/2], fo[len(fo)-1]
	}
	for _, d := range fo {
		down += d
	}
	return fmt.Sprintf("%d events, %d epochs, %d kills, %d stops; IncreaseSize: %d calls, %d acknowledged, %d refused, %d unknown; probe writes: %d of %d acknowledged, %d refused; leader down to the next acknowledged write: p50 %s, max %s over %d; serving %.1f%% of %s; answers other than success: %v; other calls: %v",
		len(evs), epochs, r.kills, r.stops, r.calls, r.okCalls, len(r.refused), r.unknown, r.probesOK, r.probes, len(r.probesRefused), p50.Round(time.Millisecond), worst.Round(time.Millisecond), len(fo),
		100*(1-down.Seconds()/length.Seconds()), length, r.why, r.others)
}

// chaos kills and stops replicas, one at a time, and brings them back.
type chaos struct {
	t        *testing.T
	replicas []*replicaProc
	rng      *mrand.Rand
	rep      *stormReport
	stopped  map[*replicaProc]bool
}

func newChaos(t *testing.T, replicas []*replicaProc, rng *mrand.Rand, rep *stormReport) *chaos {
	return &chaos{t: t, replicas: replicas, rng: rng, rep: rep, stopped: map[*replicaProc]bool{}}
}

// run strikes every 3 to 9 s until ctx ends: the leader two times in
// three, else a follower; SIGKILL or SIGSTOP alike; the victim is back
// after 0 to 6 s (killed) or 2 to 8 s (stopped).
func (c *chaos) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(3000+c.rng.IntN(6000)) * time.Millisecond):
		}
		victim := c.pick()
		if victim == nil {
			continue
		}
		isLeader := victim == c.leader()
		kill := c.rng.IntN(2) == 0
		c.rep.mu.Lock()
		if isLeader {
			c.rep.leaderDowns = append(c.rep.leaderDowns, time.Now())
		}
		if kill {
			c.rep.kills++
		} else {
			c.rep.stops++
		}
		c.rep.mu.Unlock()
		if kill {
			victim.signal(syscall.SIGKILL)
			c.wait(ctx, 6000)
			victim.start()
		} else {
			c.stop(victim)
			c.wait(ctx, 6000)
			c.resume(victim)
		}
		c.t.Logf("chaos: %s %s (leader %v)", map[bool]string{true: "killed", false: "stopped"}[kill], victim.name, isLeader)
	}
}

func (c *chaos) wait(ctx context.Context, upToMillis int) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(c.rng.IntN(upToMillis)) * time.Millisecond):
	}
}

// pick is the next victim among the running replicas, or nil.
func (c *chaos) pick() *replicaProc {
	if l := c.leader(); l != nil && c.rng.IntN(3) < 2 {
		return l
	}
	var up []*replicaProc
	for _, r := range c.replicas {
		if r.running() {
			up = append(up, r)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[c.rng.IntN(len(up))]
}

// leader is the running replica that logged the newest election, if any.
func (c *chaos) leader() *replicaProc {
	var found *replicaProc
	best := -1
	for _, r := range c.replicas {
		if !r.running() {
			continue
		}
		for _, m := range leaderElectedLine.FindAllStringSubmatch(r.logText(), -1) {
			if e, _ := strconv.Atoi(m[1]); e > best {
				best, found = e, r
			}
		}
	}
	return found
}

func (c *chaos) stop(r *replicaProc) {
	if r.running() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGSTOP)
		c.stopped[r] = true
	}
}

func (c *chaos) resume(r *replicaProc) {
	if c.stopped[r] {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGCONT)
		delete(c.stopped, r)
	}
}

// heal resumes every stopped replica and starts every dead one.
func (c *chaos) heal() {
	for _, r := range c.replicas {
		c.resume(r)
		if !r.running() {
			r.start()
		}
	}
}

// increaseTraced calls IncreaseSize(+1) with a traceparent of its own and
// returns the request key the log records for it.
func (r *replicaProc) increaseTraced() (string, error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	trace := hex.EncodeToString(id[:])
	key := "trace " + trace + " homelab +1"
	ctxOf := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		return metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+trace+"-00f067aa0ba902b7-01"), cancel
	}
	return key, r.callProvider(ctxOf, func(ctx context.Context, c pb.CloudProviderClient) error {
		_, err := c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "homelab", Delta: 1})
		return err
	})
}

// decreaseTarget calls DecreaseTargetSize(-1), churn the checks ignore.
func (r *replicaProc) decreaseTarget() error {
	return r.callProvider(func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 5*time.Second)
	}, func(ctx context.Context, c pb.CloudProviderClient) error {
		_, err := c.NodeGroupDecreaseTargetSize(ctx, &pb.NodeGroupDecreaseTargetSizeRequest{Id: "homelab", Delta: -1})
		return err
	})
}
