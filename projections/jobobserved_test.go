package projections_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// TestJobObservedMarksTheJobAndRefusesAnother: JobObserved marks the
// claim's startup Job and the slot's last shutdown Job as shown by the
// cluster; one naming another Job, or no known operation, is refused and
// changes nothing.
func TestJobObservedMarksTheJobAndRefusesAnother(t *testing.T) {
	s := projections.NewState()
	const slot, group, claim = "a", "g", "a-1"
	ref := events.Ref{Claim: claim, Slot: slot, Group: group, Attempt: 1, Cause: "test"}
	foldAll(t, s,
		events.GroupDeclared{Ref: events.Ref{Group: group, Cause: "pool"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}},
		events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: group, Cause: "pool"}},
		events.ClaimCreated{Ref: ref, RequestedAt: t0, RequestedBy: "ca", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: group}, DeadlineAt: t0.Add(time.Hour)},
		events.ClaimBooting{Ref: ref, StartupJob: claim + "-start-1"},
	)
	refused := func(d events.JobObserved) {
		t.Helper()
		before := *s.Claims[claim]
		e := events.Event{Seq: s.Seq + 1, Time: t0.Add(time.Hour), Type: d.EventType(), Aggregate: events.AggregateOf(d), Data: d}
		var re *projections.RefusedError
		if err := projections.Evolve(s, e); !errors.As(err, &re) {
			t.Fatalf("%+v: %v, want refused", d, err)
		}
		if c := s.Claims[claim]; c.StartupJobObserved != before.StartupJobObserved || len(c.Timeline) != len(before.Timeline) {
			t.Fatalf("a refused JobObserved changed the claim")
		}
	}
	refused(events.JobObserved{Ref: ref, Job: claim + "-start-2", Operation: "startup", Created: true})
	refused(events.JobObserved{Ref: ref, Job: claim + "-start-1", Operation: "restart"})
	refused(events.JobObserved{Ref: ref, Job: claim + "-stop-1", Operation: "shutdown"})
	foldAll(t, s, events.JobObserved{Ref: ref, Job: claim + "-start-1", Operation: "startup", Created: true})
	if !s.Claims[claim].StartupJobObserved {
		t.Fatal("the startup Job is not marked observed")
	}
	foldAll(t, s,
		events.ClaimReady{Ref: ref, Node: slot},
		events.ScaleDownRequested{Ref: ref, RequestedBy: "ca", Request: events.Request{Call: events.CallDeleteNodes, Group: group}},
		events.ShutdownFired{Ref: ref, Job: claim + "-stop-1", ShutdownAttempt: 1},
	)
	if s.Slots[slot].LastShutdown.Observed {
		t.Fatal("a shutdown Job fired is observed before its JobObserved")
	}
	foldAll(t, s, events.JobObserved{Ref: ref, Job: claim + "-stop-1", Operation: "shutdown"})
	if !s.Slots[slot].LastShutdown.Observed {
		t.Fatal("the shutdown Job is not marked observed")
	}
	foldAll(t, s, events.ShutdownFired{Ref: ref, Job: claim + "-stop-2", ShutdownAttempt: 2})
	if s.Slots[slot].LastShutdown.Observed {
		t.Fatal("the next shutdown Job inherited the last one's observation")
	}
}

// TestJobObservedRecordsTheOutcomeOnce: a JobObserved with an outcome
// records how the Job ended and when the record was made, on the claim's
// startup Job or the slot's last shutdown Job, once; the first record of
// a shutdown Job keeps when it was observed. A JobObserved of an older
// log, with no outcome, records none.
func TestJobObservedRecordsTheOutcomeOnce(t *testing.T) {
	s := projections.NewState()
	const slot, group, claim = "a", "g", "a-1"
	ref := events.Ref{Claim: claim, Slot: slot, Group: group, Attempt: 1, Cause: "test"}
	foldAll(t, s,
		events.GroupDeclared{Ref: events.Ref{Group: group, Cause: "pool"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}},
		events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: group, Cause: "pool"}},
		events.ClaimCreated{Ref: ref, RequestedAt: t0, RequestedBy: "ca", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: group}, DeadlineAt: t0.Add(time.Hour)},
		events.ClaimBooting{Ref: ref, StartupJob: claim + "-start-1"},
	)
	var old events.JobObserved
	if err := json.Unmarshal([]byte(`{"claim":"a-1","slot":"a","group":"g","cause":"boot","job":"a-1-start-1","operation":"startup","created":true}`), &old); err != nil {
		t.Fatal(err)
	}
	foldAll(t, s, old)
	if c := s.Claims[claim]; !c.StartupJobObserved || c.StartupJobOutcome != nil {
		t.Fatalf("observed %v outcome %+v, want observed with no outcome", c.StartupJobObserved, c.StartupJobOutcome)
	}
	end := t0.Add(time.Minute)
	foldAll(t, s,
		events.JobObserved{Ref: ref, Job: claim + "-start-1", Operation: "startup", Outcome: events.JobSucceeded, FinishedAt: &end},
		events.JobObserved{Ref: ref, Job: claim + "-start-1", Operation: "startup", Outcome: events.JobFailed},
	)
	if o := s.Claims[claim].StartupJobOutcome; o == nil || o.Outcome != events.JobSucceeded || !o.FinishedAt.Equal(end) || o.RecordedAt.IsZero() {
		t.Fatalf("startup outcome %+v, want the first: succeeded at %s", o, end)
	}
	foldAll(t, s,
		events.ClaimReady{Ref: ref, Node: slot},
		events.ScaleDownRequested{Ref: ref, RequestedBy: "ca", Request: events.Request{Call: events.CallDeleteNodes, Group: group}},
		events.ShutdownFired{Ref: ref, Job: claim + "-stop-1", ShutdownAttempt: 1},
		// First seen finished: observed and its outcome in one.
		events.JobObserved{Ref: ref, Job: claim + "-stop-1", Operation: "shutdown", Outcome: events.JobFailed, Reason: "DeadlineExceeded"},
	)
	ls := s.Slots[slot].LastShutdown
	if !ls.Observed || ls.ObservedAt == nil || ls.Outcome == nil || ls.Outcome.Outcome != events.JobFailed || ls.Outcome.Reason != "DeadlineExceeded" {
		t.Fatalf("last shutdown %+v outcome %+v", ls, ls.Outcome)
	}
}
