package sim_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// jobsByAttempt counts the lifecycle Jobs of a claim by operation/attempt.
func jobsOf(t *testing.T, w *sim.World, claim, op string) []string {
	t.Helper()
	list, err := w.Fake.BatchV1().Jobs("claimstream").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range list.Items {
		if j.Labels[handlers.LabelClaim] == claim && j.Labels[handlers.LabelOperation] == op {
			out = append(out, j.Name)
		}
	}
	return out
}

// simOnly advances the clock with the machines running and no claimstream
// process (the reactors are down).
func simOnly(t *testing.T, h interface{ Now() time.Time }, w *sim.World, d time.Duration, set func(time.Time)) {
	t.Helper()
	end := h.Now().Add(d)
	for {
		if _, err := w.Sim.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		at, ok := w.Sim.NextAt()
		if !ok || at.After(end) {
			set(end)
			if _, err := w.Sim.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
			return
		}
		if at.After(h.Now()) {
			set(at)
		}
	}
}

func TestRestartMidBoot(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, time.Minute, "booting", phaseIs("a", projections.PhaseBooting))
	name := claimOf(h, "a").Name
	// The process is down while the Job completes and the machine boots.
	w.Stop()
	simOnly(t, h.Clock, w, 2*time.Minute, h.Clock.SetTime)
	h.Restart()
	if err := w.Restart(context.Background(), h.Views, h.Service); err != nil {
		t.Fatal(err)
	}
	runUntil(t, w, 10*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	if jobs := jobsOf(t, w, name, decide.OperationStartup); len(jobs) != 1 {
		t.Fatalf("startup Jobs after the restart: %v", jobs)
	}
}

func TestRestartBetweenBootingAndJobCreate(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	name := claimOf(h, "a").Name
	// The booting move landed, the process died before the Job create.
	h.MustExec(decide.BootClaim{Claim: name})
	w.Stop()
	h.Restart()
	if err := w.Restart(context.Background(), h.Views, h.Service); err != nil {
		t.Fatal(err)
	}
	runUntil(t, w, 10*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	if jobs := jobsOf(t, w, name, decide.OperationStartup); len(jobs) != 1 || jobs[0] != decide.JobName(name, "start", 1) {
		t.Fatalf("startup Jobs: %v", jobs)
	}
}

func TestRestartMidShutdown(t *testing.T) {
	h, w := newWorld(t, sim.Timing{})
	declare(t, h, "g", events.GroupSpec{}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "ca"})
	runUntil(t, w, 10*time.Minute, "ready", phaseIs("a", projections.PhaseReady))
	name := claimOf(h, "a").Name
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "ca"})
	runUntil(t, w, time.Minute, "shutdown fired", func(s *projections.State) bool { return s.Claims[name].LastShutdownJob != "" })
	w.Stop()
	simOnly(t, h.Clock, w, time.Minute, h.Clock.SetTime)
	h.Restart()
	if err := w.Restart(context.Background(), h.Views, h.Service); err != nil {
		t.Fatal(err)
	}
	runUntil(t, w, 10*time.Minute, "completed", phaseIs("a", projections.PhaseCompleted))
	if jobs := jobsOf(t, w, name, decide.OperationShutdown); len(jobs) != 1 {
		t.Fatalf("shutdown Jobs: %v", jobs)
	}
	if jobs := jobsOf(t, w, name, decide.OperationStartup); len(jobs) != 1 {
		t.Fatalf("startup Jobs: %v", jobs)
	}
}
