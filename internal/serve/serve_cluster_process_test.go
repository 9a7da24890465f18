package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/claimstream/claimstream/events/eventstest"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// replicaArgsEnv carries a child's serve arguments, one per line.
const replicaArgsEnv = "CLAIMSTREAM_REPLICA_ARGS"

const replicaAPIToken = "replica-test-token-0123456789abcdef"

// replicaProc is one `claimstream serve` process of a three-replica test:
// the test binary started again as the command, in a process group of its
// own that dies with the test.
type replicaProc struct {
	t      testing.TB
	name   string
	args   []string
	api    string
	grpc   string
	cmd    *exec.Cmd
	exited chan struct{}

	mu   sync.Mutex
	logs bytes.Buffer
}

func (r *replicaProc) start() {
	r.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessThreeServeReplicasShareOneLog$")
	cmd.Env = append(os.Environ(), replicaArgsEnv+"="+strings.Join(r.args, "\n"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.logs.Reset()
	r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	exited := r.exited
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			r.mu.Lock()
			r.logs.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(exited)
	}()
}

func (r *replicaProc) running() bool {
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the process group and waits (bounded) for the exit.
func (r *replicaProc) signal(sig syscall.Signal) {
	r.t.Helper()
	if !r.running() {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, sig)
	select {
	case <-r.exited:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
		r.t.Fatalf("%s did not exit on %v:\n%s", r.name, sig, r.logText())
	}
}

func (r *replicaProc) logText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

var viewsAtStop = regexp.MustCompile(`msg="views at stop" seq=(\d+) digest=([0-9a-f]+)`)

// stoppedAt is the seq and views digest the replica logged when it stopped.
func (r *replicaProc) stoppedAt() (string, string) {
	r.t.Helper()
	m := viewsAtStop.FindStringSubmatch(r.logText())
	if m == nil {
		r.t.Fatalf("%s logged no views at stop:\n%s", r.name, r.logText())
	}
	return m[1], m[2]
}

func (r *replicaProc) get(path string, out any) (int, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+r.api+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+replicaAPIToken)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// replicaState is what a replica shows of the log and its views.
type replicaState struct {
	Seq, Last uint64
	Claims    string
}

func (r *replicaProc) state() (replicaState, error) {
	var h struct {
		Status    string
		Seq, Last uint64
		Reason    string
	}
	code, err := r.get("/readyz", &h)
	if err != nil {
		return replicaState{}, fmt.Errorf("%s: %w", r.name, err)
	}
	if code != http.StatusOK {
		return replicaState{}, fmt.Errorf("%s not ready: %d %s %s", r.name, code, h.Status, h.Reason)
	}
	var claims struct {
		Seq   uint64
		Items json.RawMessage
	}
	if _, err := r.get("/api/v1/claims", &claims); err != nil {
		return replicaState{}, fmt.Errorf("%s claims: %w", r.name, err)
	}
	return replicaState{Seq: h.Seq, Last: h.Last, Claims: string(claims.Items)}, nil
}

// sameLog waits until every running replica is ready, its views reflect
// the whole log, and all show the same log end and the same claims; it
// returns that state.
func sameLog(t testing.TB, replicas []*replicaProc) replicaState {
	t.Helper()
	var agreed replicaState
	eventstest.CheckFor(t, 120*time.Second, 100*time.Millisecond, func() error {
		var first *replicaState
		for _, r := range replicas {
			if !r.running() {
				return fmt.Errorf("%s exited:\n%s", r.name, r.logText())
			}
			st, err := r.state()
			if err != nil {
				return fmt.Errorf("%w\n%s's log, its last lines:\n%s", err, r.name, lastLines(r.logText(), 40))
			}
			if st.Seq != st.Last {
				return fmt.Errorf("%s views at %d, log at %d", r.name, st.Seq, st.Last)
			}
			if first == nil {
				first = &st
				continue
			}
			if st != *first {
				return fmt.Errorf("%s shows %d %s, another %d %s", r.name, st.Last, st.Claims, first.Last, first.Claims)
			}
		}
		agreed = *first
		return nil
	})
	return agreed
}

// lastLines is the end of a replica's log: what it did last when it
// stopped answering.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// quiet waits until the log stops growing for a second (the reactors of
// every replica have done what the claims asked), and all agree.
func quiet(t testing.TB, replicas []*replicaProc) replicaState {
	t.Helper()
	var st, seen replicaState
	var since time.Time
	eventstest.CheckFor(t, 120*time.Second, 200*time.Millisecond, func() error {
		a := sameLog(t, replicas)
		if since.IsZero() || a.Last != seen.Last {
			seen, since = a, time.Now()
			return fmt.Errorf("log at %d: watching it for a second", a.Last)
		}
		if held := time.Since(since); held < time.Second {
			return fmt.Errorf("log at %d for %s: watching it for a second", a.Last, held.Round(time.Millisecond))
		}
		st = a
		return nil
	})
	return st
}

// increaseSize asks every running replica's provider in turn until one
// (the leader) accepts, as cluster-autoscaler reaches the leader through
// the Service that selects it.
func increaseSize(t testing.TB, replicas []*replicaProc) {
	t.Helper()
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		var errs []error
		for _, r := range replicas {
			if !r.running() {
				continue
			}
			err := r.increase(1)
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
		}
		return errors.Join(errs...)
	})
}

// increase calls the replica's provider once.
func (r *replicaProc) increase(delta int32) error {
	return r.callProvider(ctx10s, func(ctx context.Context, c pb.CloudProviderClient) error {
		_, err := c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "homelab", Delta: delta})
		return err
	})
}

// ctx10s is the call context of the replica tests' provider calls.
func ctx10s() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// callProvider makes one call to the replica's provider on a connection
// of its own, in the context ctxOf gives.
func (r *replicaProc) callProvider(ctxOf func() (context.Context, context.CancelFunc), call func(context.Context, pb.CloudProviderClient) error) error {
	conn, err := grpc.NewClient(r.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := ctxOf()
	defer cancel()
	return call(ctx, pb.NewCloudProviderClient(conn))
}

// leaderOf is the running replica that logged its election last.
func leaderOf(t testing.TB, replicas []*replicaProc) *replicaProc {
	t.Helper()
	var found *replicaProc
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		best := -1
		for _, r := range replicas {
			if !r.running() {
				continue
			}
			for _, m := range leaderElectedLine.FindAllStringSubmatch(r.logText(), -1) {
				if e, _ := strconv.Atoi(m[1]); e > best {
					best, found = e, r
				}
			}
		}
		if found == nil {
			return errors.New("no running replica logged its election")
		}
		return nil
	})
	return found
}

var leaderElectedLine = regexp.MustCompile(`msg="leader elected" replica=\S+ epoch=(\d+)`)

// Three serve processes on loopback form one NATS cluster and share one
// log: a claim written through one replica's provider is in every
// replica's views; a follower killed with SIGKILL leaves the others
// writing and catches up when it is back; all three restarted at once come
// back with identical views.
func TestProcessThreeServeReplicasShareOneLog(t *testing.T) {
	if args := os.Getenv(replicaArgsEnv); args != "" {
		// Started by this test: be `claimstream` with these arguments.
		os.Args = append([]string{"claimstream"}, strings.Split(args, "\n")...)
		runMain()
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("starts three serve processes")
	}
	replicas := threeReplicas(t)
	sameLog(t, replicas)

	increaseSize(t, replicas)
	one := sameLog(t, replicas)
	if !strings.Contains(one.Claims, `"group":"homelab"`) {
		t.Fatalf("no claim of homelab in the views: %s", one.Claims)
	}

	// A follower dies without a word; the others keep writing.
	leader := leaderOf(t, replicas)
	follower, others := replicas[2], []*replicaProc{replicas[0], replicas[1]}
	if leader == follower {
		follower, others = replicas[0], []*replicaProc{replicas[1], replicas[2]}
	}
	follower.signal(syscall.SIGKILL)
	increaseSize(t, others)
	two := sameLog(t, others)
	if two.Last <= one.Last {
		t.Fatalf("no write with a replica down: log at %d, was %d", two.Last, one.Last)
	}
	// Back on its data dir, it catches up.
	follower.start()
	back := sameLog(t, replicas)
	if back.Last < two.Last {
		t.Fatalf("the restarted replica is at %d, the log was at %d", back.Last, two.Last)
	}

	// Two of three gone: the survivor is not ready and says why.
	replicas[1].signal(syscall.SIGKILL)
	replicas[2].signal(syscall.SIGKILL)
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		var h struct{ Status, Reason string }
		code, err := replicas[0].get("/readyz", &h)
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(h.Reason, "JetStream quorum lost: 1 of 3 replicas reachable; writes stop until 2 are up") {
			return fmt.Errorf("readyz %d %+v", code, h)
		}
		return nil
	})
	if !strings.Contains(replicas[0].logText(), `msg="JetStream quorum lost: 1 of 3 replicas reachable; writes stop until 2 are up"`) {
		t.Fatalf("the survivor did not log the lost quorum:\n%s", replicas[0].logText())
	}
	replicas[1].start()
	replicas[2].start()
	sameLog(t, replicas)
	if !strings.Contains(replicas[0].logText(), `msg="JetStream quorum back`) {
		t.Fatalf("the survivor did not log the quorum's return:\n%s", replicas[0].logText())
	}

	// All three stop together: one log, one set of views.
	before := quiet(t, replicas)
	seq0, digest0 := stopAllAtTheEnd(t, replicas, before.Last)

	// And come back together with the same views.
	for _, r := range replicas {
		r.start()
	}
	after := sameLog(t, replicas)
	if after.Last < before.Last {
		t.Fatalf("after the restart the log ends at %d, before at %d", after.Last, before.Last)
	}
	quiet(t, replicas)
	stopAll(replicas)
	seq1, digest1 := replicas[0].stoppedAt()
	for _, r := range replicas[1:] {
		if seq, digest := r.stoppedAt(); seq != seq1 || digest != digest1 {
			t.Fatalf("after the restart %s stopped at %s with views %s; %s at %s with %s", r.name, seq, digest, replicas[0].name, seq1, digest1)
		}
	}
	if seq1 == seq0 && digest1 != digest0 {
		t.Fatalf("the same log (seq %s) gave views %s before the restart and %s after", seq0, digest0, digest1)
	}
}

// stopAll sends SIGTERM to every replica at once and waits for them.
// stopAllAtTheEnd stops the replicas of a quiet log (at seq last) and
// checks that every one stopped at that seq with the same views' digest,
// which it returns.
func stopAllAtTheEnd(t testing.TB, replicas []*replicaProc, last uint64) (seq, digest string) {
	t.Helper()
	stopAll(replicas)
	seq0, digest0 := replicas[0].stoppedAt()
	for _, r := range replicas[1:] {
		if seq, digest := r.stoppedAt(); seq != seq0 || digest != digest0 {
			t.Fatalf("%s stopped at %s with views %s; %s at %s with %s", r.name, seq, digest, replicas[0].name, seq0, digest0)
		}
	}
	if seq0 != fmt.Sprint(last) {
		t.Fatalf("the replicas stopped at %s, the log was at %d", seq0, last)
	}
	return seq0, digest0
}

func stopAll(replicas []*replicaProc) {
	for _, r := range replicas {
		if r.running() {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	// All are stopping; wait for each in turn.
	for _, r := range replicas {
		r.signal(syscall.SIGTERM)
	}
}
