package handlers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/projections"
)

// lagDelay is how far the informers of a lagging renv are behind its
// writes, on the harness clock: a pass at one instant never sees what the
// passes before it wrote unless the adapter remembers its own writes.
const lagDelay = 2 * time.Second

// lagging is a renv whose fake's watches lag lagDelay on the harness
// clock, with the fake's TTL controller on the same clock, and a count of
// the POSTs and PATCHes the API server received.
type lagging struct {
	*renv
	mu     sync.Mutex
	writes map[string]int // "create jobs/<name>", "patch nodes/<name>"
}

func newLagging(t *testing.T) *lagging {
	t.Helper()
	h := handlerstest.New(t)
	e := &renv{t: t, h: h, f: kube.NewFakeWith(kube.FakeOptions{Clock: h.Clock, WatchDelay: lagDelay})}
	l := &lagging{renv: e, writes: map[string]int{}}
	e.f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var name string
		switch a := a.(type) {
		case k8stesting.CreateAction:
			if o, ok := a.GetObject().(interface{ GetName() string }); ok {
				name = o.GetName()
			}
		case k8stesting.PatchAction:
			name = a.GetName()
		default:
			return false, nil, nil
		}
		l.mu.Lock()
		l.writes[a.GetVerb()+" "+a.GetResource().Resource+"/"+name]++
		l.mu.Unlock()
		return false, nil, nil
	})
	e.f.StampCreation(func() time.Time { return h.Clock.Now().UTC() }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	e.cl = kube.New(e.f, kube.Options{Namespace: ns, Versions: e.f.Versions(ns), Clock: h.Clock})
	e.cl.Start(ctx)
	t.Cleanup(func() { cancel(); e.cl.Shutdown() })
	if !e.cl.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	e.acts = &actionLog{Cluster: e.cl, store: h.Store}
	e.r = handlers.NewReactors(handlers.ReactorsConfig{Views: h.Views, Service: h.Service, Cluster: e.acts, Clock: h.Clock, Namespace: ns, Log: rquiet})
	return l
}

func (l *lagging) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes[key]
}

// reconcile runs every reactor n times at the current instant, with no
// wait for the informers in between (what the work queue does when the
// fold of an append requeues the slot).
func (l *lagging) reconcile(n int) {
	l.t.Helper()
	for range n {
		if _, err := l.r.ReconcileAll(context.Background()); err != nil {
			l.t.Fatal(err)
		}
	}
}

// catchUp moves the clock past the informers' lag and waits for them.
func (l *lagging) catchUp() {
	l.t.Helper()
	l.step(lagDelay)
	if err := l.cl.Settle(context.Background()); err != nil {
		l.t.Fatal(err)
	}
}

// observed lists the JobObserved events of a claim's timeline.
func observed(c projections.Claim) int {
	n := 0
	for _, s := range c.Timeline {
		if s.Type == events.TypeJobObserved {
			n++
		}
	}
	return n
}

// TestBootAndShutdownPostEachJobOnce: on informers that lag the writes, a
// boot POSTs its startup Job once and a scale-down cordons once and POSTs
// its shutdown Job once, however many passes run before the informers
// catch up; the log records each Job observed once.
func TestBootAndShutdownPostEachJobOnce(t *testing.T) {
	l := newLagging(t)
	l.declare("g", events.GroupSpec{}, false, "a")
	l.increase("g", 1)
	l.reconcile(5)
	c := l.claim("a")
	if c.Phase != projections.PhaseBooting {
		t.Fatalf("claim %s, want booting", c.Phase)
	}
	if n := l.count("create jobs/" + c.StartupJob); n != 1 {
		t.Fatalf("startup Job POSTed %d times, want 1", n)
	}
	if !c.StartupJobObserved || observed(c) != 1 {
		t.Fatalf("startup Job observed %v, %d JobObserved", c.StartupJobObserved, observed(c))
	}

	l.catchUp()
	l.finishJob(c.StartupJob, true, "")
	l.register("a", true)
	l.catchUp()
	l.passes()
	if c = l.claim("a"); c.Phase != projections.PhaseReady {
		t.Fatalf("claim %s, want ready", c.Phase)
	}
	cordons := l.count("patch nodes/a")
	l.h.MustExec(handlers.DeleteNodes{Group: "g", Nodes: []handlers.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	l.reconcile(5)
	job := handlers.JobName(c.Name, "stop", 1)
	if n := l.count("create jobs/" + job); n != 1 {
		t.Fatalf("shutdown Job POSTed %d times, want 1", n)
	}
	if n := l.count("patch nodes/a") - cordons; n != 1 {
		t.Fatalf("node patched %d times for the scale-down, want 1 (the cordon)", n)
	}
	if sl := l.slot("a"); sl.LastShutdown == nil || sl.LastShutdown.Job != job || !sl.LastShutdown.Observed {
		t.Fatalf("last shutdown %+v, want %s observed", sl.LastShutdown, job)
	}
}

// TestStartupJobGoneIsNotRunAgain: a startup Job the cluster showed and
// that is gone before its Node registers (removed by its TTL, or by hand)
// is never created again for its attempt.
func TestStartupJobGoneIsNotRunAgain(t *testing.T) {
	ttl := int32(1)
	for _, tc := range []struct {
		name string
		spec *events.JobSpec
		gone func(l *lagging, job string)
	}{
		{"by hand", &events.JobSpec{PodSpec: testPodSpec}, func(l *lagging, job string) {
			if err := l.f.DeleteJob(context.Background(), ns, job); err != nil {
				l.t.Fatal(err)
			}
		}},
		{"by its TTL", &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: &ttl}, func(l *lagging, job string) {
			l.finishJob(job, true, "")
			l.step(time.Duration(ttl) * time.Second)
			if l.jobs()[job] { // the TTL controller ran at this look
				l.t.Fatalf("the TTL controller did not remove %s", job)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLagging(t)
			l.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
				return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: tc.spec, Shutdown: &events.JobSpec{PodSpec: testPodSpec}}
			}, "a")
			l.increase("g", 1)
			l.reconcile(2)
			l.catchUp()
			c := l.claim("a")
			tc.gone(l, c.StartupJob)
			l.catchUp()
			if _, ok := l.cl.Job(c.StartupJob); ok {
				t.Fatal("the Job is still in the cache")
			}
			l.reconcile(3)
			l.catchUp()
			l.passes()
			if n := l.count("create jobs/" + c.StartupJob); n != 1 {
				t.Fatalf("startup Job POSTed %d times, want 1", n)
			}
			if l.jobs()[c.StartupJob] {
				t.Fatal("the startup Job was created again")
			}
			if c := l.claim("a"); c.Phase != projections.PhaseBooting {
				t.Fatalf("claim %s, want still booting (its deadline decides)", c.Phase)
			}
		})
	}
}

// TestCrashBetweenBootingAndCreateGetsItsJobOnce: a ClaimBooting whose
// process died before the create still gets its Job, once, on informers
// that lag.
func TestCrashBetweenBootingAndCreateGetsItsJobOnce(t *testing.T) {
	l := newLagging(t)
	l.declare("g", events.GroupSpec{}, false, "a")
	l.increase("g", 1)
	c := l.claim("a")
	l.h.MustExec(handlers.BootClaim{Claim: c.Name, Cause: "the process died after this append"})
	c = l.claim("a")
	if c.Phase != projections.PhaseBooting || c.StartupJobObserved || len(l.jobs()) != 0 {
		t.Fatalf("claim %s observed %v, jobs %v", c.Phase, c.StartupJobObserved, l.jobs())
	}
	l.reconcile(4)
	if n := l.count("create jobs/" + c.StartupJob); n != 1 {
		t.Fatalf("startup Job POSTed %d times, want 1", n)
	}
	if c := l.claim("a"); !c.StartupJobObserved || observed(c) != 1 {
		t.Fatalf("observed %v, %d JobObserved", c.StartupJobObserved, observed(c))
	}
}

// TestShutdownJobGoneIsNotFollowedAtOnce: a shutdown Job removed by its
// TTL as soon as it finished, with the machine's Node still up, is not
// followed by another within the settle window: the log, not the cache,
// says when it ran. Past its window the next shutdown fires, once.
func TestShutdownJobGoneIsNotFollowedAtOnce(t *testing.T) {
	ttl := int32(0)
	l := newLagging(t)
	l.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
		return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: &events.JobSpec{PodSpec: testPodSpec},
			Shutdown: &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: &ttl}}
	}, "a")
	l.increase("g", 1)
	l.reconcile(2)
	l.catchUp()
	c := l.claim("a")
	l.finishJob(c.StartupJob, true, "")
	l.register("a", true)
	l.catchUp()
	l.passes()
	if c = l.claim("a"); c.Phase != projections.PhaseReady {
		t.Fatalf("claim %s, want ready", c.Phase)
	}
	l.h.MustExec(handlers.DeleteNodes{Group: "g", Nodes: []handlers.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	l.reconcile(3)
	l.catchUp()
	first, next := handlers.JobName(c.Name, "stop", 1), handlers.JobName(c.Name, "stop", 2)
	if !l.jobs()[first] {
		t.Fatalf("shutdown Job %s not created: %v", first, l.jobs())
	}
	finished := l.h.Clock.Now()
	l.finishJob(first, true, "")
	if l.jobs()[first] { // the TTL controller ran at this look
		t.Fatalf("the TTL controller did not remove %s", first)
	}
	l.catchUp()
	if _, ok := l.cl.Job(first); ok {
		t.Fatalf("%s is still in the cache", first)
	}
	for l.h.Clock.Since(finished) < handlers.ShutdownSettle {
		l.reconcile(2)
		l.catchUp()
		l.passes()
		if n := l.count("create jobs/" + next); n != 0 {
			t.Fatalf("%s after the shutdown Job finished, the next was POSTed %d times, want none within %s",
				l.h.Clock.Since(finished), n, handlers.ShutdownSettle)
		}
		l.step(5 * time.Second)
	}
	if n := l.count("create jobs/" + first); n != 1 {
		t.Fatalf("shutdown Job %s POSTed %d times, want 1", first, n)
	}
	// Past the latest the gone Job could have ended, plus the settle: the
	// machine still up gets the next shutdown, once.
	for deadline := finished.Add(projections.DefaultJobTimeout + handlers.ShutdownSettle + time.Minute); l.count("create jobs/"+next) == 0; {
		if l.h.Clock.Now().After(deadline) {
			t.Fatalf("no next shutdown Job by %s after the first finished", l.h.Clock.Since(finished))
		}
		l.step(10 * time.Second)
		l.reconcile(2)
		l.catchUp()
		l.passes()
	}
	l.reconcile(3)
	if n := l.count("create jobs/" + next); n != 1 {
		t.Fatalf("shutdown Job %s POSTed %d times, want 1", next, n)
	}
}
