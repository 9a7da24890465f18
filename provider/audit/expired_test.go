package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/audit"
)

func TestExpiredTellsWhatTheCheckpointKnew(t *testing.T) {
	first := time.Date(2027, 4, 1, 0, 0, 0, 0, time.UTC)
	cp := projections.CheckpointInfo{Seq: 800, Time: first.Add(-time.Minute)}
	ready := t0.Add(3 * time.Minute)
	claim := &projections.Claim{Name: "a-000001", Slot: "a", Group: "g", Phase: projections.PhaseReady, Attempt: 1, RequestedAt: t0, RequestedBy: "cluster-autoscaler",
		Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"}, ReadyAt: &ready}
	cases := []struct {
		name string
		x    audit.Expiry
		want []string
	}{
		{"held by the checkpoint", audit.Expiry{FirstSeq: 801, FirstAt: first, Checkpoint: cp, Claim: claim},
			[]string{"history expired", "before seq 801", "older than 2027-04-01T00:00:00Z", "last known state from checkpoint at seq 800 (2027-03-31T23:59:00Z)", "ready on slot a", "requested 2026-03-04T03:00:00Z by cluster-autoscaler", "ready since 2026-03-04T03:03:00Z"}},
		{"collected before", audit.Expiry{FirstSeq: 801, FirstAt: first, Checkpoint: cp},
			[]string{"history expired", "does not hold the claim", "its story is gone"}},
		{"no checkpoint", audit.Expiry{FirstSeq: 801, FirstAt: first},
			[]string{"history expired", "no checkpoint holds them"}},
	}
	for _, c := range cases {
		l := audit.Expired("a-000001", c.x)
		for _, w := range c.want {
			if !strings.Contains(l.Text, w) {
				t.Errorf("%s: %q does not say %q", c.name, l.Text, w)
			}
		}
		if l.Claim != "a-000001" || l.Type != "checkpoint" {
			t.Errorf("%s: line %+v", c.name, l)
		}
	}
	if audit.HasCreation(nil, "a-000001") {
		t.Error("no events hold a creation")
	}
}
