package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/provider/audit"
)

// TestStoryTellsRecordedSideEffects: the input law's pause, a Node delete
// and a failed instance's deletion read as sentences, not type names.
func TestStoryTellsRecordedSideEffects(t *testing.T) {
	ref := events.Ref{Slot: "node-1.lan", Group: "homelab", Cause: "test"}
	claimRef := ref
	claimRef.Claim, claimRef.Attempt = "node-1.lan-aaaaaa", 1
	datas := []events.Data{
		events.UnclaimedShutdownPaused{Ref: ref, Attempts: 3, PausedUntil: t0.Add(30 * time.Minute)},
		events.NodeDeleteRequested{Ref: ref, Node: "node-1.lan", Why: "NotReady after its machine's shutdown"},
		events.FailedInstanceDeleted{Ref: claimRef, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Group: "homelab", Nodes: []string{"homelab://node-1.lan"}}},
	}
	want := []string{
		"3 shutdown Jobs did not power off a machine no claim wants; paused until 2026-03-04T03:30:00Z",
		"node node-1.lan deleted: NotReady after its machine's shutdown",
		"failed instance deleted by cluster-autoscaler via DeleteNodes(homelab://node-1.lan)",
	}
	var evs []events.Event
	for i, d := range datas {
		evs = append(evs, events.Event{Seq: uint64(i + 1), Time: t0, Type: d.EventType(), Data: d})
	}
	got := audit.Render(audit.Story(evs))
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("story lacks %q:\n%s", w, got)
		}
	}
}

// TestStoryTellsASupersedingClaim: a merged log's second ClaimCreated on a
// slot with a live claim reads as superseding it, as the fold applies it.
func TestStoryTellsASupersedingClaim(t *testing.T) {
	ref := func(claim string) events.Ref {
		return events.Ref{Claim: claim, Slot: "node-1.lan", Group: "homelab", Attempt: 1, Cause: "test"}
	}
	req := events.Request{Call: events.CallManual, Group: "homelab"}
	datas := []events.Data{
		events.ClaimCreated{Ref: ref("old"), RequestedAt: t0, RequestedBy: "ca", Request: req, DeadlineAt: t0.Add(time.Hour)},
		events.ClaimBooting{Ref: ref("old"), StartupJob: "old-start-1"},
		events.ClaimCreated{Ref: ref("new"), RequestedAt: t0, RequestedBy: "alice", Request: req, DeadlineAt: t0.Add(time.Hour)},
		events.ClaimFailed{Ref: ref("new"), Reason: "StartupJobFailed"},
		events.ClaimCreated{Ref: ref("third"), RequestedAt: t0, RequestedBy: "ca", Request: req, DeadlineAt: t0.Add(time.Hour)},
	}
	var evs []events.Event
	for i, d := range datas {
		evs = append(evs, events.Event{Seq: uint64(i + 1), Time: t0, Type: d.EventType(), Data: d})
	}
	lines := audit.Story(evs)
	if !strings.Contains(lines[2].Text, "supersedes old") {
		t.Errorf("the second claim's line does not say it supersedes the first: %q", lines[2].Text)
	}
	if strings.Contains(lines[4].Text, "supersedes") {
		t.Errorf("a claim on a slot whose claim ended supersedes nothing: %q", lines[4].Text)
	}
}
