package sim_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

// The example story on the example pool's groups and slots, on a fake
// clock: claims move through their phases as the README says.
func TestExampleScenario(t *testing.T) {
	sc, err := sim.LoadScenario("../../deploy/examples/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := handlerstest.New(t)
	refusals := &refusalLog{}
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Timing: sc.TimingOf(), Log: slog.New(refusals)})
	posts := countJobPosts(w.Fake)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	// The example pool itself, as serve applies it.
	cfg, err := pool.Load("../../deploy/examples/pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&pool.Applier{Service: h.Service, Views: h.Views, Clock: h.Clock, Log: quiet}).Apply(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := w.Play(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	var failed, ready, completed int
	h.Read(func(s *projections.State) {
		for _, c := range s.Claims {
			switch c.Phase {
			case projections.PhaseFailed:
				failed++
			case projections.PhaseReady:
				ready++
			case projections.PhaseCompleted:
				completed++
			}
		}
		if sl := s.Slots["node-1.lan"]; sl.LastShutdown == nil || sl.LastShutdown.Claim != "" {
			t.Errorf("the hand-started node-1.lan was not shut down by the input law: %+v", sl.LastShutdown)
		}
		for _, name := range []string{"node-1.lan", "node-2.lan", "node-3.lan", "burst-1", "burst-2"} {
			if d := s.Slots[name].LastClaim; d != nil {
				t.Logf("%-11s %-9s attempt %d %s", name, d.Phase, d.Attempt, d.Reason)
			}
		}
	})
	if r := refusals.all(); len(r) > 0 {
		t.Errorf("the example scenario has refused steps: %v", r)
	}
	// The two burst claims complete too: the CI pods' work came and went,
	// and the built-in scaler released its machines after the hold.
	if failed != 1 || ready != 2 || completed != 4 {
		t.Fatalf("failed %d ready %d completed %d; want 1, 2, 4", failed, ready, completed)
	}
	for _, b := range []string{"burst-1", "burst-2"} {
		if c := claimOf(h, b); c.Reason != projections.ReasonScaledDown {
			t.Fatalf("%s's last claim ended %q, want scaled down by the built-in scaler", b, c.Reason)
		}
	}
	if c := claimOf(h, "node-1.lan"); c.Reason != projections.ReasonCancelledByDecreaseTargetSize {
		t.Fatalf("node-1.lan's last claim ended %s, want cancelled while pending", c.Reason)
	}
	// Every lifecycle Job was POSTed once and observed once, created: none
	// was created again, none found by a second create. Its outcome is
	// recorded once, apart, when it is seen finished.
	seen, ended := map[string]int{}, map[string]int{}
	for _, e := range readAll(t, h) {
		if d, ok := e.Data.(events.JobObserved); ok {
			if d.Outcome != "" {
				ended[d.Job]++
				continue
			}
			seen[d.Job]++
			if !d.Created {
				t.Errorf("Job %s observed %q, not created by its first POST", d.Job, d.Cause)
			}
		}
	}
	for job, n := range posts.all() {
		if n != 1 || seen[job] != 1 || ended[job] > 1 {
			t.Errorf("Job %s POSTed %d times, observed %d times, its outcome %d times; want 1, 1 and at most 1", job, n, seen[job], ended[job])
		}
	}
	if len(seen) == 0 {
		t.Fatal("no lifecycle Job observed")
	}
}

// jobPosts counts the Job creates a fake clientset receives, by name.
type jobPosts struct {
	mu sync.Mutex
	n  map[string]int
}

func countJobPosts(f *kube.Fake) *jobPosts {
	p := &jobPosts{n: map[string]int{}}
	f.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if j, ok := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job); ok {
			p.mu.Lock()
			p.n[j.Name]++
			p.mu.Unlock()
		}
		return false, nil, nil
	})
	return p
}

func (p *jobPosts) all() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.n)
}

// refusalLog keeps the "scenario step refused" lines of a world's log.
type refusalLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *refusalLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *refusalLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "scenario step refused" {
		return nil
	}
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += fmt.Sprintf(" %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return nil
}
func (l *refusalLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *refusalLog) WithGroup(string) slog.Handler      { return l }

func (l *refusalLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}
