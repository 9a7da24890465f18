package handlers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
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
		case k8stesting.DeleteAction:
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
	e.cl = e.f.NewCluster(kube.Options{Namespace: ns, Clock: h.Clock})
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

// bootToReady takes a fresh claim on slot to ready by hand, on informers
// that lag.
func (l *lagging) bootToReady(group, slot string) projections.Claim {
	l.t.Helper()
	l.increase(group, 1)
	l.reconcile(2)
	l.catchUp()
	c := l.claim(slot)
	l.finishJob(c.StartupJob, true, "")
	l.register(slot, true)
	l.catchUp()
	l.passes()
	if c = l.claim(slot); c.Phase != projections.PhaseReady {
		l.t.Fatalf("claim %s is %s, want ready", c.Name, c.Phase)
	}
	return c
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
	l.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	l.reconcile(5)
	job := decide.JobName(c.Name, "stop", 1)
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
// that is gone before its Node registers (removed by a TTL of its own, or
// by hand) is never created again for its attempt.
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
		{"by its own TTL", &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: &ttl}, func(l *lagging, job string) {
			l.finishJob(job, true, "")
			l.step(time.Duration(ttl) * time.Second)
			if l.jobs()[job] { // the TTL controller ran at this look
				l.t.Fatalf("the TTL controller did not remove %s", job)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLagging(t)
			if ttl := tc.spec.TTLSecondsAfterFinished; ttl != nil {
				l.ownTTL(*ttl)
			}
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
	l.h.MustExec(decide.BootClaim{Claim: c.Name, Cause: "the process died after this append"})
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

// ownTTL makes every Job the reactors create carry ttlSecondsAfterFinished
// ttl, as a claimstream that copied the pool's TTL onto its Jobs made them:
// the fake's TTL controller removes them.
func (l *lagging) ownTTL(ttl int32) {
	l.f.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if j, ok := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job); ok {
			j.Spec.TTLSecondsAfterFinished = &ttl
		}
		return false, nil, nil
	})
}

// TestShutdownJobGoneIsNotFollowedAtOnce: a shutdown Job gone as soon as
// it finished (ttlSecondsAfterFinished 0), with the machine's Node still
// up, is not followed by another within the settle window: the log, not
// the cache, says when it ran. Removed by claimstream, its outcome is in
// the log and the next fires one ShutdownSettle after its end; removed by
// a TTL controller before any pass saw it finished (a Job that carries
// its own TTL), the next waits the latest it could have ended plus the
// settle. Past that window the next shutdown fires, once.
func TestShutdownJobGoneIsNotFollowedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ownTTL bool
		window time.Duration // from the first Job's end to the next shutdown, at most
	}{
		{"by claimstream after its outcome", false, handlers.ShutdownSettle + 10*time.Second},
		{"by its own TTL", true, projections.DefaultJobTimeout + handlers.ShutdownSettle + time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttl := int32(0)
			l := newLagging(t)
			if tc.ownTTL {
				l.ownTTL(ttl)
			}
			l.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
				return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: &events.JobSpec{PodSpec: testPodSpec},
					Shutdown: &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: &ttl}}
			}, "a")
			c := l.bootToReady("g", "a")
			l.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
			l.reconcile(3)
			l.catchUp()
			first, next := decide.JobName(c.Name, "stop", 1), decide.JobName(c.Name, "stop", 2)
			if !l.jobs()[first] {
				t.Fatalf("shutdown Job %s not created: %v", first, l.jobs())
			}
			finished := l.h.Clock.Now()
			l.finishJob(first, true, "")
			if l.jobs()[first] == tc.ownTTL { // the TTL controller ran at this look
				t.Fatalf("Job %s there %v, want %v", first, !tc.ownTTL, !tc.ownTTL)
			}
			l.catchUp()
			l.passes()
			l.catchUp()
			if _, ok := l.cl.Job(first); ok || l.jobs()[first] {
				t.Fatalf("%s is still there", first)
			}
			ls := l.slot("a").LastShutdown
			// claimstream deleted it after its outcome was in the log; a TTL
			// controller took it before any pass saw it finished.
			wantDeletes := 1
			if tc.ownTTL {
				wantDeletes = 0
			}
			if deleted := l.count("delete jobs/" + first); tc.ownTTL != (ls.Outcome == nil) || deleted != wantDeletes {
				t.Fatalf("outcome %+v, %d deletes by claimstream, want %d", ls.Outcome, deleted, wantDeletes)
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
			// The machine still up gets the next shutdown, once.
			for l.count("create jobs/"+next) == 0 {
				if l.h.Clock.Since(finished) > tc.window {
					t.Fatalf("no next shutdown Job %s after the first finished, want one within %s", l.h.Clock.Since(finished), tc.window)
				}
				l.step(5 * time.Second)
				l.reconcile(2)
				l.catchUp()
				l.passes()
			}
			l.reconcile(3)
			if n := l.count("create jobs/" + next); n != 1 {
				t.Fatalf("shutdown Job %s POSTed %d times, want 1", next, n)
			}
		})
	}
}

// TestCrashAfterCreateThenTTLGetsNoSecondJob: the process created the
// startup Job and died before its JobObserved landed; it stays down past
// the Job's end and the pool's ttlSecondsAfterFinished, and the machine's
// Node registers late. The Job is not created again: the TTL is
// claimstream's to honour once the Job's outcome is in the log, so the
// Job is still there when the process comes back.
func TestCrashAfterCreateThenTTLGetsNoSecondJob(t *testing.T) {
	ttl := int32(1)
	startup := &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: &ttl}
	l := newLagging(t)
	l.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
		return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: startup, Shutdown: &events.JobSpec{PodSpec: testPodSpec}}
	}, "a")
	l.increase("g", 1)
	c := l.claim("a")
	l.h.MustExec(decide.BootClaim{Claim: c.Name, Cause: "the process dies after the create"})
	c = l.claim("a")
	// The create the dead process made, as it made it.
	job, err := kube.BuildJob(kube.JobDefaults{Namespace: ns}, handlers.JobRequest{
		Name: c.StartupJob, Namespace: ns, Slot: "a", Claim: c.Name, Attempt: c.Attempt, Operation: decide.OperationStartup,
		Labels:      map[string]string{handlers.LabelClaim: c.Name, handlers.LabelSlot: "a", handlers.LabelOperation: decide.OperationStartup},
		Annotations: map[string]string{handlers.AnnotationSlot: "a"}, Spec: *startup,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.f.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.catchUp()
	l.finishJob(c.StartupJob, true, "")
	l.step(time.Duration(ttl) * time.Second)
	l.jobs() // the TTL controller's look
	l.catchUp()
	// Back up, the Node not registered yet.
	l.reconcile(3)
	l.catchUp()
	l.passes()
	if n := l.count("create jobs/" + c.StartupJob); n != 1 {
		t.Fatalf("startup Job POSTed %d times, want 1", n)
	}
	if c := l.claim("a"); !c.StartupJobObserved || c.Phase != projections.PhaseBooting {
		t.Fatalf("claim %s observed %v, want booting with its Job observed", c.Phase, c.StartupJobObserved)
	}
	l.register("a", true)
	l.catchUp()
	l.passes()
	if c := l.claim("a"); c.Phase != projections.PhaseReady {
		t.Fatalf("claim %s, want ready", c.Phase)
	}
	if n := l.count("create jobs/" + c.StartupJob); n != 1 {
		t.Fatalf("startup Job POSTed %d times, want 1", n)
	}
}

// TestFinishedJobGoesItsTTLAfterItsOutcome: claimstream deletes a
// finished startup Job once its outcome is in the log and its claim left
// booting, the pool's ttlSecondsAfterFinished after the outcome's record;
// a pool with no TTL keeps its Jobs.
func TestFinishedJobGoesItsTTLAfterItsOutcome(t *testing.T) {
	thirty := int32(30)
	for _, ttl := range []*int32{&thirty, nil} {
		l := newLagging(t)
		l.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
			return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: ttl},
				Shutdown: &events.JobSpec{PodSpec: testPodSpec}}
		}, "a")
		l.increase("g", 1)
		l.reconcile(2)
		l.catchUp()
		c := l.claim("a")
		l.finishJob(c.StartupJob, true, "")
		l.catchUp()
		l.passes()
		c = l.claim("a")
		o := c.StartupJobOutcome
		if o == nil || o.Outcome != events.JobSucceeded || o.FinishedAt.IsZero() {
			t.Fatalf("outcome %+v, want succeeded with its end", o)
		}
		// Booting: the Job is kept (its report, the readiness gate).
		l.step(time.Minute)
		l.passes()
		if !l.jobs()[c.StartupJob] {
			t.Fatal("the startup Job of a booting claim was deleted")
		}
		l.register("a", true)
		l.catchUp()
		l.passes()
		if c = l.claim("a"); c.Phase != projections.PhaseReady {
			t.Fatalf("claim %s, want ready", c.Phase)
		}
		l.catchUp()
		l.passes()
		if ttl == nil {
			l.step(24 * time.Hour)
			l.passes()
			if !l.jobs()[c.StartupJob] || l.count("delete jobs/"+c.StartupJob) != 0 {
				t.Fatal("a Job of a pool with no ttlSecondsAfterFinished was deleted")
			}
			continue
		}
		// Its TTL passed from the record while the claim booted: it goes
		// once the claim left booting, once.
		if l.jobs()[c.StartupJob] || l.count("delete jobs/"+c.StartupJob) != 1 {
			t.Fatalf("startup Job there %v, %d deletes, want gone after 1", l.jobs()[c.StartupJob], l.count("delete jobs/"+c.StartupJob))
		}
	}
}

// TestShutdownJobWaitsItsTTLFromItsOutcome: a finished shutdown Job is
// deleted no sooner than the pool's TTL after its outcome's record.
func TestShutdownJobWaitsItsTTLFromItsOutcome(t *testing.T) {
	ttl := int32(600)
	l := newLagging(t)
	l.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
		return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: &events.JobSpec{PodSpec: testPodSpec},
			Shutdown: &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: &ttl}}
	}, "a")
	c := l.bootToReady("g", "a")
	l.catchUp()
	l.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	l.catchUp()
	l.passes()
	job := decide.JobName(c.Name, "stop", 1)
	l.finishJob(job, true, "")
	l.setReady("a", false)
	l.catchUp()
	l.passes()
	ls := l.slot("a").LastShutdown
	if ls == nil || ls.Job != job || ls.Outcome == nil {
		t.Fatalf("last shutdown %+v, want %s with its outcome", ls, job)
	}
	due := ls.Outcome.RecordedAt.Add(time.Duration(ttl) * time.Second)
	for l.h.Clock.Now().Before(due.Add(-30 * time.Second)) {
		l.step(30 * time.Second)
		l.catchUp()
		l.passes()
		if l.count("delete jobs/"+job) != 0 {
			t.Fatalf("deleted %s before its TTL from the outcome (%s)", l.h.Clock.Now().Sub(ls.Outcome.RecordedAt), due)
		}
	}
	for deadline := due.Add(time.Minute); l.count("delete jobs/"+job) == 0; {
		if l.h.Clock.Now().After(deadline) {
			t.Fatalf("%s not deleted by %s after its outcome", job, l.h.Clock.Now().Sub(ls.Outcome.RecordedAt))
		}
		l.step(10 * time.Second)
		l.catchUp()
		l.passes()
	}
	if n := l.count("delete jobs/" + job); n != 1 {
		t.Fatalf("%s deleted %d times, want 1", job, n)
	}
}

// TestSupersededAndCollectedJobsGoByTheirTTL: a shutdown Job followed by
// another (the machine stayed up) is deleted the pool's TTL after its
// end, and the last one the TTL after its outcome's record, even once
// its claim was collected and the slot has nothing else to do.
func TestSupersededAndCollectedJobsGoByTheirTTL(t *testing.T) {
	ttl := int32(2 * 3600) // past the claim's TTL: the claim is collected first
	l := newLagging(t)
	l.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
		return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: &events.JobSpec{PodSpec: testPodSpec},
			Shutdown: &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: &ttl}}
	}, "a")
	c := l.bootToReady("g", "a")
	l.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	l.catchUp()
	l.passes()
	first, second := decide.JobName(c.Name, "stop", 1), decide.JobName(c.Name, "stop", 2)
	end1 := l.h.Clock.Now()
	l.finishJob(first, true, "") // the machine stays up
	for l.count("create jobs/"+second) == 0 {
		if l.h.Clock.Since(end1) > handlers.ShutdownSettle+time.Minute {
			t.Fatalf("no second shutdown Job %s after the first", l.h.Clock.Since(end1))
		}
		l.step(10 * time.Second)
		l.catchUp()
		l.passes()
	}
	l.catchUp()
	end2 := l.h.Clock.Now()
	l.finishJob(second, true, "")
	l.setReady("a", false)
	l.catchUp()
	l.passes()
	if c := l.claim("a"); c.Phase != projections.PhaseCompleted {
		t.Fatalf("claim %s, want completed", c.Phase)
	}
	deleted := func(job string) bool { return l.count("delete jobs/"+job) > 0 }
	due1, due2 := end1.Add(time.Duration(ttl)*time.Second), end2.Add(time.Duration(ttl)*time.Second)
	for l.h.Clock.Now().Before(due2.Add(2 * time.Minute)) {
		l.step(time.Minute)
		l.catchUp()
		l.passes()
		now := l.h.Clock.Now()
		for _, j := range []struct {
			name     string
			end, due time.Time
		}{{first, end1, due1}, {second, end2, due2}} {
			if early, late := deleted(j.name) && now.Before(j.due), !deleted(j.name) && now.After(j.due.Add(time.Minute)); early || late {
				t.Fatalf("%s after its end, %s deleted %v, its TTL %s", now.Sub(j.end), j.name, deleted(j.name), j.due.Sub(j.end))
			}
		}
	}
	if sl := l.slot("a"); len(sl.Claims) != 0 {
		t.Fatalf("the claim was not collected: %v", sl.Claims)
	}
	if !deleted(first) || !deleted(second) || l.jobs()[first] || l.jobs()[second] {
		t.Fatalf("deleted %v %v, jobs %v", deleted(first), deleted(second), l.jobs())
	}
}

// TestJobWithItsOwnTTLIsLeftToKubernetes: a Job that carries a
// ttlSecondsAfterFinished of its own (made by an earlier claimstream)
// gets its outcome recorded and is never deleted by claimstream.
func TestJobWithItsOwnTTLIsLeftToKubernetes(t *testing.T) {
	pool := int32(30)
	l := newLagging(t)
	l.ownTTL(3600)
	l.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
		return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: &events.JobSpec{PodSpec: testPodSpec, TTLSecondsAfterFinished: &pool},
			Shutdown: &events.JobSpec{PodSpec: testPodSpec}}
	}, "a")
	c := l.bootToReady("g", "a")
	l.step(10 * time.Minute)
	l.catchUp()
	l.passes()
	if o := l.claim("a").StartupJobOutcome; o == nil || o.Outcome != events.JobSucceeded {
		t.Fatalf("outcome %+v, want succeeded", o)
	}
	if n := l.count("delete jobs/" + c.StartupJob); n != 0 || !l.jobs()[c.StartupJob] {
		t.Fatalf("claimstream deleted %s (%d deletes), a Job with its own TTL", c.StartupJob, n)
	}
}
