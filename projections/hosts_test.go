package projections_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// A burst instance registers under the name and providerID its startup Job
// reported, not the slot's: the views find the slot from either, after a
// snapshot too, and forget them when the slot's next claim is made.
func TestReportedHostIsTheSlotsNodeUntilTheNextClaim(t *testing.T) {
	f := newFold(t)
	r := ref("c1", "a", "test")
	f.must(events.ClaimCreated{Ref: r, RequestedAt: t0, RequestedBy: "t", Request: events.Request{Call: events.CallManual, Group: "g"}, DeadlineAt: t0.Add(time.Hour)})
	f.must(events.ClaimBooting{Ref: r, StartupJob: "c1-start-1"})
	sl := f.s.Slots["a"]
	if sl.NodeName() != "a" || sl.CurrentProviderID() != "homelab://a" {
		t.Fatalf("before a report: node %q providerID %q, want the slot's own", sl.NodeName(), sl.CurrentProviderID())
	}
	const node, pid = "ip-10-0-3-7", "aws:///eu-west-1a/i-0abc"
	f.must(events.HostExpected{Ref: r, Node: node, ProviderID: pid, InstanceID: "i-0abc", DeadlineAt: t0.Add(time.Hour)})

	check := func(t *testing.T, s *projections.State) {
		t.Helper()
		sl := s.Slots["a"]
		if sl.NodeName() != node || sl.CurrentProviderID() != pid {
			t.Fatalf("node %q providerID %q, want %q %q", sl.NodeName(), sl.CurrentProviderID(), node, pid)
		}
		for _, q := range []struct{ name, pid string }{{"", pid}, {node, ""}, {"other", pid}, {"a", ""}, {"", "homelab://a"}} {
			if got, ok := s.SlotForNode(q.name, q.pid); !ok || got.Name != "a" {
				t.Fatalf("SlotForNode(%q, %q) = %v, %v; want slot a", q.name, q.pid, got, ok)
			}
		}
	}
	check(t, f.s)

	// A snapshot is rebuilt with its lookups.
	body, err := json.Marshal(f.s)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := json.Marshal(map[string]any{"version": projections.SnapshotVersion, "seq": f.s.Seq, "state": json.RawMessage(body)})
	loaded, err := projections.DecodeSnapshot(env)
	if err != nil {
		t.Fatal(err)
	}
	check(t, loaded)

	// The claim ends and the slot's next claim buys another machine.
	f.must(events.ClaimFailed{Ref: r, Reason: projections.ReasonStartupJobFailed})
	r2 := ref("c2", "a", "test")
	f.must(events.ClaimCreated{Ref: r2, RequestedAt: t0, RequestedBy: "t", Request: events.Request{Call: events.CallManual, Group: "g"}, DeadlineAt: t0.Add(time.Hour)})
	if sl := f.s.Slots["a"]; sl.NodeName() != "a" || sl.CurrentProviderID() != "homelab://a" {
		t.Fatalf("after a new claim: node %q providerID %q, want the slot's own", sl.NodeName(), sl.CurrentProviderID())
	}
	for _, q := range []struct{ name, pid string }{{"", pid}, {node, ""}} {
		if got, ok := f.s.SlotForNode(q.name, q.pid); ok {
			t.Fatalf("SlotForNode(%q, %q) = %s after the host was forgotten", q.name, q.pid, got.Name)
		}
	}
}

// A retired slot's reported host is no slot's.
func TestRetiredSlotForgetsItsHost(t *testing.T) {
	f := newFold(t)
	r := ref("c1", "a", "test")
	f.must(events.ClaimCreated{Ref: r, RequestedAt: t0, RequestedBy: "t", Request: events.Request{Call: events.CallManual, Group: "g"}, DeadlineAt: t0.Add(time.Hour)})
	f.must(events.ClaimBooting{Ref: r, StartupJob: "c1-start-1"})
	f.must(events.HostExpected{Ref: r, Node: "ip-1", ProviderID: "aws:///x/i-1", DeadlineAt: t0.Add(time.Hour)})
	f.must(events.SlotRetired{Ref: ref("", "a", "gone")})
	if got, ok := f.s.SlotForNode("ip-1", "aws:///x/i-1"); ok {
		t.Fatalf("a retired slot's host maps to slot %s", got.Name)
	}
	if f.s.Slots["a"].Host != nil {
		t.Fatalf("retired slot keeps host %+v", f.s.Slots["a"].Host)
	}
}
