package handlerstest

import (
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// StepTo moves the clock to Start+d (never back).
func (h *Harness) StepTo(d time.Duration) {
	h.T.Helper()
	at := Start.Add(d)
	if at.Before(h.Clock.Now()) {
		h.T.Fatalf("step to %s goes back from %s", at, h.Clock.Now())
	}
	h.Clock.SetTime(at)
}

// History writes the scripted history, starting at Start (09:00), and
// returns its claims by role; after, when set, runs after each
// declaration and command (a test records the views there):
//
//   - group homelab with slots node-1.lan, node-2.lan, node-3.lan; group gpu
//     with slot gpu-1;
//   - 09:01 cluster-autoscaler IncreaseSize(+2): claims on node-1.lan
//     ("first") and node-2.lan ("steady"); both boot at 09:01:15;
//     "steady" is Ready at 09:04:27;
//   - 09:13:11 "first" misses its deadline: failed DeadlineExceeded with a
//     forced shutdown, whose Job fires at 09:13:20;
//   - 09:14 IncreaseSize(+2) again: node-3.lan ("broken", attempt 1) and
//     node-1.lan ("second", attempt 2: its last claim booted and failed);
//     both boot at 09:14:10; "second" is Ready at 09:17:22; "broken"
//     fails StartupJobFailed at 09:19 (forced shutdown);
//   - 10:14 the collector removes "first" from the views (TTL 1h);
//   - 11:00 DeleteNodes(node-1.lan) marks "second" for scale-down; its
//     shutdown Jobs fire at 11:00:05 and 11:03:05; it completes at 11:04;
//   - 11:05 alice decommissions node-3.lan ("bad PSU");
//   - 11:06 bob claims gpu-1 by hand ("manual"), still pending at the end.
func (h *Harness) History(after func()) map[string]string {
	h.T.Helper()
	if after == nil {
		after = func() {}
	}
	claims := map[string]string{}
	do := func(cmd decide.Command) []string {
		h.T.Helper()
		r := h.MustExec(cmd)
		after()
		return r.Claims()
	}
	h.Declare("homelab", events.GroupSpec{MinSize: 0, MaxSize: 3}, "node-1.lan", "node-2.lan", "node-3.lan")
	after()
	h.Declare("gpu", events.GroupSpec{MaxSize: 1, MaxNodeProvisionTime: events.Duration(20 * time.Minute)}, "gpu-1")
	after()
	m := time.Minute
	h.StepTo(1 * m)
	cl := do(decide.IncreaseSize{Group: "homelab", Delta: 2, RequestedBy: "cluster-autoscaler"})
	claims["first"], claims["steady"] = h.claimOn(cl, "node-1.lan"), h.claimOn(cl, "node-2.lan")
	h.StepTo(1*m + 15*time.Second)
	do(decide.BootClaim{Claim: claims["first"]})
	do(decide.BootClaim{Claim: claims["steady"]})
	h.StepTo(4*m + 27*time.Second)
	do(decide.MarkReady{Claim: claims["steady"], Node: "node-2.lan"})
	h.StepTo(13*m + 11*time.Second)
	do(decide.ExpireDeadline{Claim: claims["first"]})
	h.StepTo(13*m + 20*time.Second)
	do(decide.FireShutdown{Claim: claims["first"], Force: true, Cause: "forced shutdown of a failed claim"})
	h.StepTo(14 * m)
	cl = do(decide.IncreaseSize{Group: "homelab", Delta: 2, RequestedBy: "cluster-autoscaler"})
	claims["second"], claims["broken"] = h.claimOn(cl, "node-1.lan"), h.claimOn(cl, "node-3.lan")
	h.StepTo(14*m + 10*time.Second)
	do(decide.BootClaim{Claim: claims["second"]})
	do(decide.BootClaim{Claim: claims["broken"]})
	h.StepTo(17*m + 22*time.Second)
	do(decide.MarkReady{Claim: claims["second"], Node: "node-1.lan"})
	h.StepTo(19 * m)
	do(decide.FailClaim{Claim: claims["broken"], Reason: projections.ReasonStartupJobFailed, Message: "Job node-3 start: BackoffLimitExceeded", ForceShutdown: true, Cause: "startup Job failed"})
	h.StepTo(74 * m)
	do(decide.CollectClaim{Claim: claims["first"]})
	h.StepTo(120 * m)
	do(decide.DeleteNodes{Group: "homelab", Nodes: []decide.NodeRef{{Name: "node-1.lan"}}, RequestedBy: "cluster-autoscaler"})
	h.StepTo(120*m + 5*time.Second)
	do(decide.FireShutdown{Claim: claims["second"], Cause: "scale-down"})
	h.StepTo(123*m + 5*time.Second)
	do(decide.FireShutdown{Claim: claims["second"], After: decide.JobName(claims["second"], "stop", 1), Cause: "scale-down"})
	h.StepTo(124 * m)
	do(decide.CompleteClaim{Claim: claims["second"], Reason: projections.ReasonScaledDown})
	h.StepTo(125 * m)
	do(decide.Decommission{Slot: "node-3.lan", By: "alice", Reason: "bad PSU"})
	h.StepTo(126 * m)
	cl = do(decide.ManualClaim{Slot: "gpu-1", By: "bob", Reason: "training run"})
	claims["manual"] = h.claimOn(cl, "gpu-1")
	h.StepTo(130 * m)
	return claims
}

// claimOn is the claim of claims that is on slot.
func (h *Harness) claimOn(claims []string, slot string) string {
	h.T.Helper()
	var out string
	h.Read(func(s *projections.State) {
		for _, c := range claims {
			if cl := s.Claims[c]; cl != nil && cl.Slot == slot {
				out = c
			}
		}
	})
	if out == "" {
		h.T.Fatalf("no claim of %v is on %s", claims, slot)
	}
	return out
}
