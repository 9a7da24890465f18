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
