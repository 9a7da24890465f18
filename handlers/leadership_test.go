package handlers_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/projections"
)

// testLease is a lease whose validity the test sets: a replica's own view
// of its lease (a stalled process reads false when it resumes).
type testLease struct {
	name    string
	leading atomic.Bool
}

func newTestLease(name string, leading bool) *testLease {
	l := &testLease{name: name}
	l.leading.Store(leading)
	return l
}

func (l *testLease) Leading() bool    { return l.leading.Load() }
func (l *testLease) Identity() string { return l.name }

func leadershipEvents(t *testing.T, st *eventlog.Store) []events.LeaderElected {
	t.Helper()
	var out []events.LeaderElected
	if err := st.Read(context.Background(), 1, 0, func(e events.Event) error {
		if d, ok := e.Data.(events.LeaderElected); ok {
			if e.Epoch != d.Epoch {
				t.Errorf("LeaderElected epoch %d carries header epoch %d", d.Epoch, e.Epoch)
			}
			out = append(out, d)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Two replicas that both believe they hold the lease (a split a lease
// cannot rule out while clocks run) cannot both win one epoch: the
// expectation on the leadership aggregate makes the second append a new
// epoch, and the first replica's gate and proof then refuse it.
func TestTwoReplicasCannotBothWinOneEpoch(t *testing.T) {
	h := handlerstest.New(t)
	b := h.Replica("/claimstream/b")
	la := handlers.NewLeadership(newTestLease("claimstream-0", true), h.Store, h.Views, h.Clock, nil)
	lb := handlers.NewLeadership(newTestLease("claimstream-1", true), b.Store, b.Views, h.Clock, nil)
	var wg sync.WaitGroup
	epochs := make([]uint64, 2)
	for i, l := range []*handlers.Leadership{la, lb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := l.Elect(context.Background(), "", "", "test", nil)
			if err != nil {
				t.Errorf("elect: %v", err)
			}
			epochs[i] = e
		}()
	}
	wg.Wait()
	if epochs[0] == epochs[1] || epochs[0]+epochs[1] != 3 {
		t.Fatalf("epochs %v, want 1 and 2", epochs)
	}
	got := leadershipEvents(t, h.Store)
	if len(got) != 2 || got[0].Epoch != 1 || got[1].Epoch != 2 || got[0].Replica == got[1].Replica {
		t.Fatalf("LeaderElected events %+v", got)
	}
	first, second := la, lb
	if epochs[0] == 2 {
		first, second = lb, la
	}
	// The views of each hold the later epoch once they catch up.
	for _, v := range []*projections.Runner{h.Views, b.Views} {
		last, _ := h.Store.LastSeq(context.Background())
		if err := v.WaitFor(context.Background(), last); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := second.Permit(); err != nil {
		t.Fatalf("the epoch-2 leader is refused: %v", err)
	}
	if _, err := first.Permit(); decide.CodeOf(err) != decide.CodeUnavailable {
		t.Fatalf("the epoch-1 leader may still write: %v", err)
	}
	if err := first.Prove(context.Background()); !errors.Is(err, handlers.ErrDeposed) {
		t.Fatalf("the epoch-1 leader proved its leadership: %v", err)
	}
}

// A follower's write is refused with Unavailable, naming the leader, its
// addresses and epoch, and writes nothing; the leader's events carry its
// epoch.
func TestFollowerWritesAreRefusedNamingTheLeader(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{}, handlerstest.Slots("s", 3)...)
	b := h.Replica("/claimstream/b")
	leader := handlers.NewLeadership(newTestLease("claimstream-1", true), h.Store, h.Views, h.Clock, nil)
	if _, err := leader.Elect(context.Background(), "10.0.0.5:8086", "10.0.0.5:8087", "test", nil); err != nil {
		t.Fatal(err)
	}
	h.Service.Gate = leader.Permit
	follower := handlers.NewLeadership(newTestLease("claimstream-0", false), b.Store, b.Views, h.Clock, nil)
	b.Service.Gate = follower.Permit
	if err := b.Views.WaitFor(context.Background(), h.Views.Seq()); err != nil {
		t.Fatal(err)
	}
	before := h.Views.Seq()
	_, err := b.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	if decide.CodeOf(err) != decide.CodeUnavailable || !strings.Contains(err.Error(), "not the leader: claimstream-1 (provider 10.0.0.5:8086, API 10.0.0.5:8087) leads epoch 1") {
		t.Fatalf("follower write: %v", err)
	}
	if last, _ := h.Store.LastSeq(context.Background()); last != before {
		t.Fatalf("the refused write appended: %d -> %d", before, last)
	}
	// A command the follower's views would refuse or find nothing to do
	// for gets the same answer: it is not the follower's to decide.
	for _, cmd := range []decide.Command{
		decide.IncreaseSize{Group: "g", Delta: 99, RequestedBy: "ca"},
		decide.DecreaseTargetSize{Group: "g", Delta: -1, RequestedBy: "ca"},
	} {
		if _, err := b.Service.Execute(context.Background(), cmd); decide.CodeOf(err) != decide.CodeUnavailable || !strings.Contains(err.Error(), "not the leader") {
			t.Fatalf("follower %T: %v, want Unavailable naming the leader", cmd, err)
		}
	}
	res, err := h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Events {
		if e.Epoch != 1 {
			t.Fatalf("%s written with epoch %d, want 1", e.Type, e.Epoch)
		}
	}
	got, err := h.Store.Get(context.Background(), res.Last)
	if err != nil || got.Epoch != 1 {
		t.Fatalf("stored event epoch %d (%v)", got.Epoch, err)
	}
}

// A leader whose lease lapsed by its own clock (stopped past its lease)
// appends nothing when it resumes, before any other replica did anything.
func TestLapsedLeaseRefusesEveryAppend(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{}, handlerstest.Slots("s", 2)...)
	lease := newTestLease("claimstream-0", true)
	l := handlers.NewLeadership(lease, h.Store, h.Views, h.Clock, nil)
	if _, err := l.Elect(context.Background(), "", "", "test", nil); err != nil {
		t.Fatal(err)
	}
	h.Service.Gate = l.Permit
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	lease.leading.Store(false)
	before := h.Views.Seq()
	_, err := h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	if decide.CodeOf(err) != decide.CodeUnavailable || !strings.Contains(err.Error(), "lease lapsed") {
		t.Fatalf("write with a lapsed lease: %v", err)
	}
	if last, _ := h.Store.LastSeq(context.Background()); last != before {
		t.Fatal("a write with a lapsed lease landed")
	}
}

// A deposed leader does not act on a decision whose append landed: the
// proof before the side effect reads the leadership's last event through
// the stream leader, finds another replica's LeaderElected, logs
// "deposed: not acting", steps down and creates no Job.
func TestDeposedLeaderDoesNotAct(t *testing.T) {
	e := newRenv(t)
	logs, log := logcapture.New(slog.LevelInfo)
	old := handlers.NewLeadership(newTestLease("claimstream-0", true), e.h.Store, e.h.Views, e.h.Clock, log)
	var deposedWhy atomic.Value
	if _, err := old.Elect(context.Background(), "", "", "test", func(why string) { deposedWhy.Store(why) }); err != nil {
		t.Fatal(err)
	}
	e.r = handlers.NewReactors(handlers.ReactorsConfig{Views: e.h.Views, Service: e.h.Service, Cluster: e.acts, Clock: e.h.Clock, Namespace: ns, Log: rquiet, Fence: old.Prove})
	e.declare("g", events.GroupSpec{}, false, "a", "b")
	e.h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	e.pass() // the old leader boots the claim: its Job is created
	jobs, err := e.f.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("the leader created %d Jobs (%v), want 1", len(jobs.Items), err)
	}
	// Another replica is elected while the old leader is stalled; the old
	// one's next decision lands (its append preceded the stall) ...
	b := e.h.Replica("/claimstream/b")
	if err := b.Views.WaitFor(context.Background(), e.h.Views.Seq()); err != nil {
		t.Fatal(err)
	}
	if _, err := handlers.NewLeadership(newTestLease("claimstream-1", true), b.Store, b.Views, e.h.Clock, nil).Elect(context.Background(), "", "", "test", nil); err != nil {
		t.Fatal(err)
	}
	e.h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	// ... but it acts on nothing.
	ctx := context.Background()
	if err := e.cl.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = e.r.ReconcileAll(ctx)
	if !errors.Is(err, handlers.ErrDeposed) {
		t.Fatalf("reconcile of a deposed leader: %v", err)
	}
	jobs, _ = e.f.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if len(jobs.Items) != 1 {
		t.Fatalf("the deposed leader created a Job: %d Jobs", len(jobs.Items))
	}
	if len(logs.Lines("deposed: not acting", "claimstream-1 leads epoch 2")) == 0 {
		t.Fatalf("no deposed line:\n%s", logs)
	}
	if why, _ := deposedWhy.Load().(string); !strings.Contains(why, "claimstream-1 leads epoch 2") {
		t.Fatalf("the term was not ended: %q", why)
	}
	if old.Epoch() != 0 {
		t.Fatal("the deposed leader did not step down")
	}
}

// A follower answers a read only from views that reached the log's last
// sequence; views that cannot get there within the bound are refused
// with Unavailable and the number of events they are behind.
func TestFollowerReadsWaitForTheLogsEnd(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{}, handlerstest.Slots("s", 2)...)
	// A follower whose views stopped folding (built once, never run).
	stuck := projections.NewRunner(h.Store, projections.RunnerOptions{})
	if err := stuck.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	follower := handlers.NewLeadership(newTestLease("claimstream-0", false), h.Store, stuck, h.Clock, nil)
	if err := follower.FreshReads(context.Background()); err != nil {
		t.Fatalf("views at the log's end refused: %v", err)
	}
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "ca"}) // 2 claims, SizeIncreased and ScaleRequested
	err := follower.FreshReads(context.Background())
	if decide.CodeOf(err) != decide.CodeUnavailable || !strings.Contains(err.Error(), "views 4 events behind the log") {
		t.Fatalf("stale follower read: %v", err)
	}
	// A follower whose views run catches up within the bound.
	b := h.Replica("/claimstream/b")
	if err := handlers.NewLeadership(newTestLease("claimstream-2", false), b.Store, b.Views, h.Clock, nil).FreshReads(context.Background()); err != nil {
		t.Fatalf("a running follower's read: %v", err)
	}
}

// A leader whose term ends between its gate and its append (it was
// stopped after deciding, and another replica was elected meanwhile) lands
// nothing: its append is fenced by its own LeaderElected, the log refuses
// it, and the leader steps down at once.
func TestTheLogRefusesTheAppendOfADeposedLeader(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{}, handlerstest.Slots("s", 3)...)
	b := h.Replica("/claimstream/b")
	la := handlers.NewLeadership(newTestLease("claimstream-0", true), h.Store, h.Views, h.Clock, nil)
	var deposedWhy atomic.Value
	if _, err := la.Elect(context.Background(), "", "", "test", func(why string) { deposedWhy.Store(why) }); err != nil {
		t.Fatal(err)
	}
	h.Service.Fence, h.Service.OnFenced = la.Fence, la.Fenced
	h.Service.Gate = la.Permit
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})

	lb := handlers.NewLeadership(newTestLease("claimstream-1", true), b.Store, b.Views, h.Clock, nil)
	electOnce := sync.Once{}
	h.Service.Fence = func() (uint64, uint64) {
		epoch, seq := la.Fence()
		// The other replica is elected after the gate let the write by,
		// as the fence is read: the last step before the append.
		electOnce.Do(func() {
			if err := b.Views.WaitFor(context.Background(), h.Views.Seq()); err != nil {
				t.Error(err)
			}
			if _, err := lb.Elect(context.Background(), "", "", "test", nil); err != nil {
				t.Error(err)
			}
		})
		return epoch, seq
	}
	before, _ := h.Store.LastSeq(context.Background())
	_, err := h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	if decide.CodeOf(err) != decide.CodeUnavailable || !strings.Contains(err.Error(), "a newer leader was elected") {
		t.Fatalf("the deposed leader's write: %v, want Unavailable saying a newer leader was elected", err)
	}
	if last, _ := h.Store.LastSeq(context.Background()); last != before+1 {
		t.Fatalf("the log went from %d to %d: want only the new LeaderElected", before, last)
	}
	if la.Epoch() != 0 || deposedWhy.Load() == nil {
		t.Fatalf("the fenced leader still leads epoch %d (deposed: %v)", la.Epoch(), deposedWhy.Load())
	}
}
