package audit_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/provider/audit"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var t0 = time.Date(2026, 3, 4, 3, 0, 0, 0, time.UTC)

// history is a slot whose first claim booted and missed its deadline
// (forced shutdown), and whose second claim, attempt 2, came up and was
// scaled down later.
func history() []events.Event {
	const slot, group = "node-1.lan", "homelab"
	a, b := "node-1.lan-aaaaaa", "node-1.lan-bbbbbb"
	ref := func(claim string, attempt int, cause string) events.Ref {
		return events.Ref{Claim: claim, Slot: slot, Group: group, Attempt: attempt, Cause: cause}
	}
	inc := events.Request{Call: events.CallIncreaseSize, Delta: 2, Group: group}
	del := events.Request{Call: events.CallDeleteNodes, Group: group, Nodes: []string{slot}}
	budget := events.Duration(12*time.Minute + 10*time.Second)
	var evs []events.Event
	add := func(at time.Duration, d events.Data) {
		evs = append(evs, events.Event{Seq: uint64(len(evs) + 1), Time: t0.Add(at), Type: d.EventType(), Data: d})
	}
	add(0, events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: group, Cause: "pool file pool.yaml"}, Spec: events.SlotSpec{ProviderID: "homelab://" + slot}})
	add(12*time.Minute, events.ClaimCreated{Ref: ref(a, 1, "IncreaseSize(+2) by cluster-autoscaler for group homelab"), RequestedAt: t0.Add(12 * time.Minute), RequestedBy: "cluster-autoscaler", Request: inc, DeadlineAt: t0.Add(24*time.Minute + 10*time.Second), Budget: budget, TTL: events.Duration(time.Hour)})
	add(12*time.Minute+15*time.Second, events.ClaimBooting{Ref: ref(a, 1, "boot"), StartupJob: a + "-start-1"})
	add(24*time.Minute+11*time.Second, events.ClaimFailed{Ref: ref(a, 1, "boot deadline passed"), Reason: "DeadlineExceeded", Message: "deadline 2026-03-04T03:24:10Z passed in phase booting", ForceShutdown: true})
	add(24*time.Minute+20*time.Second, events.ShutdownFired{Ref: ref(a, 1, "forced shutdown of a failed claim"), Job: a + "-stop-1", ShutdownAttempt: 1, Force: true})
	add(25*time.Minute, events.ClaimCreated{Ref: ref(b, 2, "IncreaseSize(+1) by cluster-autoscaler for group homelab"), RequestedAt: t0.Add(25 * time.Minute), RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: group}, DeadlineAt: t0.Add(37*time.Minute + 10*time.Second), Budget: budget, TTL: events.Duration(time.Hour)})
	add(25*time.Minute+10*time.Second, events.ClaimBooting{Ref: ref(b, 2, "boot"), StartupJob: b + "-start-2"})
	add(28*time.Minute+12*time.Second, events.ClaimReady{Ref: ref(b, 2, "readiness gate passed"), Node: slot})
	add(84*time.Minute+11*time.Second, events.ClaimCollected{Ref: ref(a, 1, "TTL 1h0m0s passed")})
	add(5*time.Hour, events.ScaleDownRequested{Ref: ref(b, 2, "DeleteNodes(node-1.lan) by cluster-autoscaler for group homelab"), RequestedBy: "cluster-autoscaler", Request: del, Reason: "ScaledDown"})
	add(5*time.Hour+5*time.Second, events.ShutdownFired{Ref: ref(b, 2, "scale-down"), Job: b + "-stop-1", ShutdownAttempt: 1})
	add(5*time.Hour+2*time.Minute, events.JobObserved{Ref: ref(b, 2, "job reaper: shutdown Job failed"), Job: b + "-stop-1", Operation: "shutdown", Outcome: events.JobFailed, Reason: "BackoffLimitExceeded",
		Message: "StateNotReached: never reached the state: ipmi:10.0.0.21:623 was still on 1m30s after asking for off"})
	add(5*time.Hour+3*time.Minute, events.ShutdownFired{Ref: ref(b, 2, "scale-down"), Job: b + "-stop-2", ShutdownAttempt: 2})
	add(5*time.Hour+4*time.Minute, events.ClaimCompleted{Ref: ref(b, 2, "machine observed off"), Reason: "ScaledDown"})
	evs = append(evs, events.Event{Seq: uint64(len(evs) + 1), Time: t0.Add(6 * time.Hour), Type: "FutureThing", Err: errors.New(`unknown event type "dev.claimstream.FutureThing.v1"`)})
	return evs
}

func TestStoryOfSlot(t *testing.T) {
	golden(t, "slot.golden", audit.Render(audit.Story(history())))
}

func TestStoryOfClaim(t *testing.T) {
	got := audit.Render(audit.Story(audit.OfClaim(history(), "node-1.lan-bbbbbb")))
	for _, want := range []string{"attempt 2", "Ready after 3m12s", "scale-down by cluster-autoscaler via DeleteNodes(node-1.lan)", "shutdown 2 of 3",
		"shutdown Job node-1.lan-bbbbbb-stop-1 failed (BackoffLimitExceeded): StateNotReached: never reached the state: ipmi:10.0.0.21:623 was still on"} {
		if !strings.Contains(got, want) {
			t.Errorf("story lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "aaaaaa") {
		t.Errorf("the claim's story tells another claim:\n%s", got)
	}
	golden(t, "claim.golden", got)
}

func TestClaims(t *testing.T) {
	if got := strings.Join(audit.Claims(history()), " "); got != "node-1.lan-aaaaaa node-1.lan-bbbbbb" {
		t.Fatalf("claims %q", got)
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
