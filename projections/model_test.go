package projections_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

var t0 = time.Date(2026, 3, 4, 9, 38, 15, 0, time.UTC)

func TestBudgetIsTheSumOfItsMembers(t *testing.T) {
	members := projections.DefaultTimeouts.BudgetConstants()
	want := map[string]time.Duration{
		"JobTimeout":               5 * time.Minute,
		"JobMonitorPollInterval":   30 * time.Second,
		"RegistrationWait":         90 * time.Second,
		"ReadinessGateTimeout":     4 * time.Minute,
		"MaxUncordonRetryInterval": 10 * time.Second,
		"BudgetMargin":             time.Minute,
	}
	if len(members) != len(want) {
		t.Fatalf("budget has %d members, want %d: %v", len(members), len(want), members)
	}
	var sum time.Duration
	for _, m := range members {
		d, ok := want[m.Name]
		if !ok || d != m.Duration {
			t.Errorf("member %s = %v, want %v (known: %v)", m.Name, m.Duration, d, ok)
		}
		sum += m.Duration
	}
	if sum != 12*time.Minute+10*time.Second || projections.DefaultBudget != sum {
		t.Fatalf("budget = %v (sum %v), want 12m10s", projections.DefaultBudget, sum)
	}
	// No proper subset adds up to the budget: dropping any member (the
	// 7m10s arithmetic dropped the Job timeout) is caught.
	n := len(members)
	for mask := 0; mask < 1<<n-1; mask++ {
		var s time.Duration
		for i := 0; i < n; i++ {
			if mask&(1<<i) != 0 {
				s += members[i].Duration
			}
		}
		if s == projections.DefaultBudget {
			t.Fatalf("a proper subset (mask %b) adds up to the budget", mask)
		}
	}
}

func TestGroupTimeoutsGrowTheBudget(t *testing.T) {
	spec := events.GroupSpec{Lifecycle: events.Lifecycle{
		StartupJobTimeout: events.Duration(10 * time.Minute),
		RegistrationWait:  events.Duration(3 * time.Minute),
		ReadinessGate:     events.Duration(5 * time.Minute),
	}}
	got := projections.TimeoutsOf(spec.Lifecycle).Budget()
	want := 10*time.Minute + 30*time.Second + 3*time.Minute + 5*time.Minute + 10*time.Second + time.Minute
	if got != want {
		t.Fatalf("budget = %v, want %v", got, want)
	}
	short := events.GroupSpec{Lifecycle: events.Lifecycle{StartupJobTimeout: events.Duration(2 * time.Second)}}
	if b := projections.TimeoutsOf(short.Lifecycle).Budget(); b != projections.DefaultBudget-5*time.Minute+2*time.Second {
		t.Fatalf("short job timeout budget = %v", b)
	}
}

func TestDeadlineIsFlooredByMaxNodeProvisionTime(t *testing.T) {
	for _, tc := range []struct {
		provision time.Duration
		want      time.Duration
	}{
		{0, 12*time.Minute + 10*time.Second},
		{5 * time.Minute, 12*time.Minute + 10*time.Second},
		{15 * time.Minute, 15 * time.Minute},
		{12*time.Minute + 10*time.Second, 12*time.Minute + 10*time.Second},
	} {
		spec := events.GroupSpec{MaxNodeProvisionTime: events.Duration(tc.provision)}
		if got := projections.DeadlineAt(t0, spec); !got.Equal(t0.Add(tc.want)) {
			t.Errorf("provision %v: deadline %v, want requestedAt+%v", tc.provision, got.Sub(t0), tc.want)
		}
		if g := projections.MachineGoneGrace(spec); g != tc.want {
			t.Errorf("provision %v: machine-gone grace %v, want one boot window %v", tc.provision, g, tc.want)
		}
	}
}

func TestPhasePredicates(t *testing.T) {
	for _, tc := range []struct {
		p                                   projections.Phase
		live, pending, bootWindow, terminal bool
	}{
		{projections.PhaseNone, true, true, true, false},
		{projections.PhasePending, true, true, true, false},
		{projections.PhaseBooting, true, false, true, false},
		{projections.PhaseReady, true, false, false, false},
		{projections.PhaseFailed, false, false, false, true},
		{projections.PhaseCompleted, false, false, false, true},
	} {
		if tc.p.IsLive() != tc.live || tc.p.IsPending() != tc.pending || tc.p.InBootWindow() != tc.bootWindow || tc.p.IsTerminal() != tc.terminal {
			t.Errorf("phase %q: live %v pending %v bootWindow %v terminal %v", tc.p, tc.p.IsLive(), tc.p.IsPending(), tc.p.InBootWindow(), tc.p.IsTerminal())
		}
	}
}

// fold applies events as the store would number them.
type fold struct {
	t   *testing.T
	s   *projections.State
	seq uint64
}

func newFold(t *testing.T) *fold {
	f := &fold{t: t, s: projections.NewState()}
	f.apply(events.GroupDeclared{Ref: ref("", "", "Declared"), Spec: events.GroupSpec{MaxNodeProvisionTime: events.Duration(15 * time.Minute)}})
	f.apply(events.SlotDeclared{Ref: ref("", "a", "Declared"), Spec: events.SlotSpec{ProviderID: "homelab://a"}})
	return f
}

func ref(claim, slot, cause string) events.Ref {
	return events.Ref{Claim: claim, Slot: slot, Group: "g", Attempt: 1, Cause: cause}
}

func (f *fold) apply(d events.Data) error {
	f.seq++
	e := events.Event{Seq: f.seq, Time: t0.Add(time.Duration(f.seq) * time.Second), Data: d, Type: d.EventType(), Aggregate: events.AggregateOf(d)}
	return projections.Evolve(f.s, e)
}

func (f *fold) must(d events.Data) {
	f.t.Helper()
	if err := f.apply(d); err != nil {
		f.t.Fatalf("%s: %v", d.EventType(), err)
	}
}

// phaseEvent is the event that moves claim c to phase to.
func phaseEvent(c string, to projections.Phase, kind string) events.Data {
	r := ref(c, "a", "test")
	switch to {
	case projections.PhaseBooting:
		return events.ClaimBooting{Ref: r, StartupJob: c + "-start-1"}
	case projections.PhaseReady:
		return events.ClaimReady{Ref: r, Node: "a"}
	case projections.PhaseFailed:
		if kind == "superseded" {
			return events.ClaimSuperseded{Ref: r, By: "other"}
		}
		return events.ClaimFailed{Ref: r, Reason: kind}
	default:
		if kind == "cancel" {
			return events.ClaimCancelled{Ref: r, Reason: projections.ReasonCancelledByDecreaseTargetSize}
		}
		return events.ClaimCompleted{Ref: r, Reason: kind}
	}
}

// TestPhaseTable drives a claim into every phase and tries every event of
// every target phase from there: the legal moves of the phase table apply, the
// rest are refused and change nothing.
func TestPhaseTable(t *testing.T) {
	paths := map[projections.Phase][]projections.Phase{
		projections.PhasePending:   {},
		projections.PhaseBooting:   {projections.PhaseBooting},
		projections.PhaseReady:     {projections.PhaseBooting, projections.PhaseReady},
		projections.PhaseFailed:    {projections.PhaseFailed},
		projections.PhaseCompleted: {projections.PhaseCompleted},
	}
	legal := map[[2]projections.Phase]bool{
		{projections.PhasePending, projections.PhaseBooting}:   true,
		{projections.PhasePending, projections.PhaseCompleted}: true,
		{projections.PhasePending, projections.PhaseFailed}:    true,
		{projections.PhaseBooting, projections.PhaseReady}:     true,
		{projections.PhaseBooting, projections.PhaseFailed}:    true,
		{projections.PhaseReady, projections.PhaseCompleted}:   true,
		{projections.PhaseReady, projections.PhaseFailed}:      true,
	}
	reasons := map[projections.Phase][]string{
		projections.PhaseBooting: {""},
		projections.PhaseReady:   {""},
		projections.PhaseFailed: {
			projections.ReasonDeadlineExceeded, projections.ReasonStartupJobFailed, projections.ReasonJobTimeout,
			projections.ReasonReadinessGateTimeout, projections.ReasonMachineGone, projections.ReasonAttemptLimitReached,
			projections.ReasonSlotDeleted, projections.ReasonHostLost, "superseded",
		},
		projections.PhaseCompleted: {"cancel", projections.ReasonScaledDown, projections.ReasonNodeDeleted, projections.ReasonDeletedByHand},
	}
	for from, path := range paths {
		for _, to := range []projections.Phase{projections.PhaseBooting, projections.PhaseReady, projections.PhaseFailed, projections.PhaseCompleted} {
			for _, reason := range reasons[to] {
				name := fmt.Sprintf("%s->%s/%s", from, to, reason)
				t.Run(name, func(t *testing.T) {
					f := newFold(t)
					f.must(events.ClaimCreated{Ref: ref("c", "a", "test"), RequestedAt: t0, RequestedBy: "test",
						Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"}, DeadlineAt: t0.Add(15 * time.Minute)})
					for _, p := range path {
						kind := "x"
						if p == projections.PhaseCompleted {
							kind = "cancel"
						}
						f.must(phaseEvent("c", p, kind))
					}
					before := *f.s.Claims["c"]
					err := f.apply(phaseEvent("c", to, reason))
					after := f.s.Claims["c"]
					wantLegal := legal[[2]projections.Phase{from, to}] && !(to == projections.PhaseCompleted && reason == "cancel" && from != projections.PhasePending)
					if to == projections.PhaseCompleted && reason != "cancel" && from == projections.PhasePending {
						// ClaimCompleted on a pending claim is the same move as a cancel.
						wantLegal = true
					}
					if wantLegal {
						if err != nil {
							t.Fatalf("legal move refused: %v", err)
						}
						if after.Phase != to {
							t.Fatalf("phase %s, want %s", after.Phase, to)
						}
						if to.IsTerminal() && (after.FinishedAt == nil || after.Reason == "") {
							t.Fatalf("terminal claim without finishedAt/reason: %+v", after)
						}
						if to == projections.PhaseReady && after.DeadlineAt != nil {
							t.Fatalf("ready claim keeps its deadline %v", after.DeadlineAt)
						}
						if to == projections.PhaseFailed && reason == "superseded" && after.Reason != projections.ReasonSuperseded {
							t.Fatalf("superseded claim reason %q", after.Reason)
						}
						if d := f.s.Slots["a"].LastClaim; d == nil || d.Phase != to {
							t.Fatalf("digest not stamped: %+v", d)
						}
						return
					}
					var refused *projections.RefusedError
					if !errors.As(err, &refused) {
						t.Fatalf("illegal move %s -> %s applied (err %v)", from, to, err)
					}
					if after.Phase != before.Phase || len(after.Timeline) != len(before.Timeline) {
						t.Fatalf("refused move changed the claim: %+v -> %+v", before, *after)
					}
					if f.s.Stats.Refused != 1 || f.s.Slots["a"].Seq != f.seq {
						t.Fatalf("refused move: stats %+v, slot seq %d (want %d)", f.s.Stats, f.s.Slots["a"].Seq, f.seq)
					}
				})
			}
		}
	}
}

func TestAttemptSeeding(t *testing.T) {
	type ending struct {
		booted, ready bool
		phase         projections.Phase
	}
	for _, tc := range []struct {
		name    string
		history []ending
		after   time.Duration
		want    int
	}{
		{"fresh slot", nil, 0, 1},
		{"after a failed boot", []ending{{true, false, projections.PhaseFailed}}, 0, 2},
		{"after two failed boots", []ending{{true, false, projections.PhaseFailed}, {true, false, projections.PhaseFailed}}, 0, 3},
		{"a success ends the streak", []ending{{true, false, projections.PhaseFailed}, {true, true, projections.PhaseCompleted}}, 0, 1},
		{"a cancelled pending claim spent nothing", []ending{{true, false, projections.PhaseFailed}, {false, false, projections.PhaseCompleted}}, 0, 2},
		{"three failed boots rest the slot", []ending{{true, false, projections.PhaseFailed}, {true, false, projections.PhaseFailed}, {true, false, projections.PhaseFailed}}, 0, 4},
		{"the rest ends after the grace", []ending{{true, false, projections.PhaseFailed}, {true, false, projections.PhaseFailed}, {true, false, projections.PhaseFailed}}, projections.ShutdownAttemptResetGrace + time.Hour, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFold(t)
			for i, h := range tc.history {
				c := fmt.Sprintf("c%d", i)
				attempt := f.s.NextAttempt("a", t0)
				r := events.Ref{Claim: c, Slot: "a", Group: "g", Attempt: attempt, Cause: "test"}
				f.must(events.ClaimCreated{Ref: r, RequestedAt: t0, RequestedBy: "t", Request: events.Request{Call: events.CallManual, Group: "g"}, DeadlineAt: t0.Add(time.Hour)})
				if h.booted {
					f.must(events.ClaimBooting{Ref: r, StartupJob: c + "-start"})
				}
				if h.ready {
					f.must(events.ClaimReady{Ref: r, Node: "a"})
				}
				switch {
				case h.phase == projections.PhaseFailed:
					f.must(events.ClaimFailed{Ref: r, Reason: projections.ReasonStartupJobFailed})
				case h.ready:
					f.must(events.ScaleDownRequested{Ref: r, RequestedBy: "t", Request: events.Request{Call: events.CallDeleteNodes, Group: "g"}})
					f.must(events.ClaimCompleted{Ref: r, Reason: projections.ReasonScaledDown})
				default:
					f.must(events.ClaimCancelled{Ref: r, Reason: projections.ReasonDeletedByHand})
				}
			}
			now := t0.Add(time.Minute + tc.after)
			if got := f.s.NextAttempt("a", now); got != tc.want {
				t.Fatalf("next attempt %d, want %d (digest %+v)", got, tc.want, f.s.Slots["a"].LastClaim)
			}
			if exhausted := f.s.Exhausted("a", now); exhausted != (tc.want > projections.MaxConsecutiveAttempts) {
				t.Fatalf("exhausted = %v", exhausted)
			}
		})
	}
}

func TestUnreadableEntriesStillMoveTheSlotSequence(t *testing.T) {
	f := newFold(t)
	f.seq++
	bad := events.Event{Seq: f.seq, Subject: "cs.slot.a.ClaimTeleported", Type: "ClaimTeleported", Aggregate: events.SlotAggregate("a"), Err: errors.New("unknown")}
	if err := projections.Evolve(f.s, bad); err != nil {
		t.Fatal(err)
	}
	if f.s.Slots["a"].Seq != f.seq || f.s.Stats.Skipped != 1 || f.s.Seq != f.seq {
		t.Fatalf("slot seq %d, stats %+v", f.s.Slots["a"].Seq, f.s.Stats)
	}
}

func TestSlotPhaseIsDerived(t *testing.T) {
	f := newFold(t)
	ph := func() projections.SlotPhase { return f.s.SlotPhase("a") }
	if ph() != projections.SlotOff {
		t.Fatalf("fresh slot %s", ph())
	}
	r := ref("c", "a", "t")
	f.must(events.ClaimCreated{Ref: r, RequestedAt: t0, RequestedBy: "t", Request: events.Request{Call: events.CallIncreaseSize, Group: "g"}, DeadlineAt: t0.Add(time.Hour)})
	if ph() != projections.SlotPending {
		t.Fatalf("pending claim: %s", ph())
	}
	f.must(events.ClaimBooting{Ref: r, StartupJob: "j"})
	if ph() != projections.SlotBooting {
		t.Fatalf("booting claim: %s", ph())
	}
	f.must(events.ClaimReady{Ref: r, Node: "a"})
	if ph() != projections.SlotReady {
		t.Fatalf("ready claim: %s", ph())
	}
	f.must(events.NodeObserved{Ref: events.Ref{Slot: "a", Group: "g", Cause: "t"}, Node: events.NodeState{Name: "a", Present: true, Ready: false}})
	if ph() != projections.SlotBooting {
		t.Fatalf("ready claim, machine off: %s", ph())
	}
	f.must(events.NodeObserved{Ref: events.Ref{Slot: "a", Group: "g", Cause: "t"}, Node: events.NodeState{Name: "a", Present: true, Ready: true}})
	f.must(events.ScaleDownRequested{Ref: r, RequestedBy: "t", Request: events.Request{Call: events.CallDeleteNodes, Group: "g"}})
	if ph() != projections.SlotDraining || f.s.TargetSize("g") != 0 || len(f.s.ClaimedSlots("g")) != 1 {
		t.Fatalf("marked claim: %s, target %d, claimed %v", ph(), f.s.TargetSize("g"), f.s.ClaimedSlots("g"))
	}
	f.must(events.ClaimCompleted{Ref: r, Reason: projections.ReasonScaledDown})
	if ph() != projections.SlotDraining {
		t.Fatalf("completed claim, machine still up: %s", ph())
	}
	f.must(events.NodeObserved{Ref: events.Ref{Slot: "a", Group: "g", Cause: "t"}, Node: events.NodeState{Name: "a"}})
	if ph() != projections.SlotOff {
		t.Fatalf("machine off: %s", ph())
	}
	f.must(events.SlotDecommissioned{Ref: events.Ref{Slot: "a", Group: "g", Cause: "t"}, By: "op"})
	if ph() != projections.SlotDecommissioned {
		t.Fatalf("decommissioned: %s", ph())
	}
}

func TestMachineGoneClock(t *testing.T) {
	f := newFold(t)
	r := ref("c", "a", "t")
	f.must(events.ClaimCreated{Ref: r, RequestedAt: t0, RequestedBy: "t", Request: events.Request{Call: events.CallIncreaseSize, Group: "g"}, DeadlineAt: t0.Add(time.Hour)})
	if err := f.apply(events.MachineObservedOff{Ref: r}); err == nil {
		t.Fatal("machine-off clock started on a pending claim")
	}
	f.must(events.ClaimBooting{Ref: r, StartupJob: "j"})
	f.must(events.ClaimReady{Ref: r, Node: "a"})
	f.must(events.MachineObservedOff{Ref: r})
	if c := f.s.Claims["c"]; c.MachineOffSince == nil {
		t.Fatal("clock not started")
	}
	f.must(events.MachineObservedOn{Ref: r})
	if c := f.s.Claims["c"]; c.MachineOffSince != nil || c.Phase != projections.PhaseReady {
		t.Fatalf("clock not cleared: %+v", c)
	}
}

func TestCollectedClaimLeavesViewsKeepsDigest(t *testing.T) {
	f := newFold(t)
	r := ref("c", "a", "t")
	f.must(events.ClaimCreated{Ref: r, RequestedAt: t0, RequestedBy: "t", Request: events.Request{Call: events.CallIncreaseSize, Group: "g"}, DeadlineAt: t0.Add(time.Hour)})
	if err := f.apply(events.ClaimCollected{Ref: r}); err == nil {
		t.Fatal("a live claim was collected")
	}
	f.must(events.ClaimFailed{Ref: r, Reason: projections.ReasonDeadlineExceeded})
	f.must(events.ClaimCollected{Ref: r})
	if _, ok := f.s.Claims["c"]; ok || len(f.s.Slots["a"].Claims) != 0 {
		t.Fatal("collected claim still in the views")
	}
	if d := f.s.Slots["a"].LastClaim; d == nil || d.Claim != "c" || d.Reason != projections.ReasonDeadlineExceeded {
		t.Fatalf("digest lost: %+v", d)
	}
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
