package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// foldAll folds datas as one log, a second apart, and fails on a refusal.
func foldAll(t *testing.T, s *projections.State, datas ...events.Data) {
	t.Helper()
	for _, d := range datas {
		seq := s.Seq + 1
		e := events.Event{Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second), Type: d.EventType(), Aggregate: events.AggregateOf(d), Data: d}
		if err := projections.Evolve(s, e); err != nil {
			t.Fatalf("seq %d %s: %v", seq, d.EventType(), err)
		}
	}
}

// TestTimelineOfANeverLandingScaleDownIsBounded: a scale-down whose machine
// never goes off fires 3 shutdowns and pauses, forever. The claim's
// timeline keeps a bounded number of steps of each kind and counts the
// rest; the stop Jobs are still numbered from every one fired.
func TestTimelineOfANeverLandingScaleDownIsBounded(t *testing.T) {
	s := projections.NewState()
	const slot, group, claim = "a", "g", "a-1"
	ref := events.Ref{Claim: claim, Slot: slot, Group: group, Attempt: 1, Cause: "test"}
	foldAll(t, s,
		events.GroupDeclared{Ref: events.Ref{Group: group, Cause: "pool"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}},
		events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: group, Cause: "pool"}},
		events.ClaimCreated{Ref: ref, RequestedAt: t0, RequestedBy: "ca", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: group}, DeadlineAt: t0.Add(time.Hour)},
		events.ClaimBooting{Ref: ref, StartupJob: claim + "-start-1"},
		events.ClaimReady{Ref: ref, Node: slot},
		events.ScaleDownRequested{Ref: ref, RequestedBy: "ca", Request: events.Request{Call: events.CallDeleteNodes, Group: group}},
	)
	const cycles = 200
	jobs := 0
	for range cycles {
		for n := 1; n <= projections.ShutdownAttemptLimit; n++ {
			jobs++
			foldAll(t, s, events.ShutdownFired{Ref: events.Ref{Claim: claim, Slot: slot, Group: group, Attempt: 1, Cause: "scale-down: DeleteNodes by ca"}, Job: fmt.Sprintf("%s-stop-%d", claim, jobs), ShutdownAttempt: n})
		}
		foldAll(t, s, events.ShutdownAttemptLimitReached{Ref: events.Ref{Claim: claim, Slot: slot, Group: group, Attempt: 1, Cause: "3 shutdown Jobs finished and the machine is still observed up"}, Attempts: 3, PausedUntil: t0.Add(time.Hour)})
	}
	c := s.Claims[claim]
	if bound := 4 + 2*projections.TimelineStepsPerKind; len(c.Timeline) > bound {
		t.Fatalf("timeline holds %d steps after %d shutdown cycles, want at most %d", len(c.Timeline), cycles, bound)
	}
	if c.StopJobs != jobs {
		t.Fatalf("StopJobs = %d, want %d", c.StopJobs, jobs)
	}
	counted := map[events.Type]int{}
	for _, st := range c.Timeline {
		counted[st.Type] += 1 + st.Repeats
	}
	if counted[events.TypeShutdownFired] != jobs || counted[events.TypeShutdownAttemptLimitReached] != cycles {
		t.Fatalf("timeline counts %d shutdowns and %d pauses, want %d and %d", counted[events.TypeShutdownFired], counted[events.TypeShutdownAttemptLimitReached], jobs, cycles)
	}
	last := c.Timeline[len(c.Timeline)-1]
	if last.Seq != s.Seq {
		t.Fatalf("the newest step has seq %d, want the log's last %d", last.Seq, s.Seq)
	}
}
