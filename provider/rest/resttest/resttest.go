// Package resttest serves the REST API over a real embedded JetStream pool
// (handlerstest) on a fake clock, with a scripted history, for the tests of
// the API and of the CLI.
package resttest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
)

// Token is the admin bearer token of every fixture; ReadToken its
// read-only token.
const (
	Token     = "s3cret-token"
	ReadToken = "r3ad-only-token"
)

// Fixture is a running API over a pool.
type Fixture struct {
	T      testing.TB
	H      *handlerstest.Harness
	Server *httptest.Server
	Client *rest.Client
	// Points are the live views after every step of the history.
	Points []Point
	// Claims names the scripted history's claims by role.
	Claims map[string]string
}

// Point is the live views at one moment of the history.
type Point struct {
	Seq   uint64
	At    time.Time
	Views rest.Replay
}

// Start serves the API over an empty pool.
func Start(t testing.TB) *Fixture {
	t.Helper()
	h := handlerstest.New(t)
	f := &Fixture{T: t, H: h, Claims: map[string]string{}}
	api := rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: Token, ReadToken: ReadToken})
	f.Server = httptest.NewServer(api)
	t.Cleanup(f.Server.Close)
	f.Client = &rest.Client{BaseURL: f.Server.URL, Token: Token}
	return f
}

// Scripted serves the API over the scripted history (History).
func Scripted(t testing.TB) *Fixture {
	t.Helper()
	f := Start(t)
	f.History()
	return f
}

// Record keeps the live views, as the API shows them now, as a point.
func (f *Fixture) Record() {
	f.T.Helper()
	ctx := context.Background()
	gs, err := f.Client.Groups(ctx)
	if err != nil {
		f.T.Fatal(err)
	}
	ss, err := f.Client.Slots(ctx, "")
	if err != nil {
		f.T.Fatal(err)
	}
	cs, err := f.Client.Claims(ctx, "", "", "")
	if err != nil {
		f.T.Fatal(err)
	}
	if gs.Seq != ss.Seq || ss.Seq != cs.Seq {
		f.T.Fatalf("views moved while recording: %d %d %d", gs.Seq, ss.Seq, cs.Seq)
	}
	now := f.H.Clock.Now().UTC()
	f.Points = append(f.Points, Point{Seq: gs.Seq, At: now, Views: rest.Replay{
		Seq: gs.Seq, At: now.Format(time.RFC3339Nano), Groups: gs.Items, Slots: ss.Items, Claims: cs.Items,
	}})
}

// Step moves the clock to Start+d (never back).
func (f *Fixture) Step(d time.Duration) {
	f.T.Helper()
	at := handlerstest.Start.Add(d)
	if at.Before(f.H.Clock.Now()) {
		f.T.Fatalf("step to %s goes back from %s", at, f.H.Clock.Now())
	}
	f.H.Clock.SetTime(at)
}

// Do runs a command and records the views after it.
func (f *Fixture) Do(cmd decide.Command) handlers.Result {
	f.T.Helper()
	r := f.H.MustExec(cmd)
	f.Record()
	return r
}

// History is the scripted history, starting at handlerstest.Start (09:00):
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
func (f *Fixture) History() {
	f.T.Helper()
	h := f.H
	h.Declare("homelab", events.GroupSpec{MinSize: 0, MaxSize: 3}, "node-1.lan", "node-2.lan", "node-3.lan")
	f.Record()
	h.Declare("gpu", events.GroupSpec{MaxSize: 1, MaxNodeProvisionTime: events.Duration(20 * time.Minute)}, "gpu-1")
	f.Record()
	m := time.Minute
	f.Step(1 * m)
	cl := f.Do(decide.IncreaseSize{Group: "homelab", Delta: 2, RequestedBy: "cluster-autoscaler"}).Claims()
	f.Claims["first"], f.Claims["steady"] = f.claimOn(cl, "node-1.lan"), f.claimOn(cl, "node-2.lan")
	f.Step(1*m + 15*time.Second)
	f.Do(decide.BootClaim{Claim: f.Claims["first"]})
	f.Do(decide.BootClaim{Claim: f.Claims["steady"]})
	f.Step(4*m + 27*time.Second)
	f.Do(decide.MarkReady{Claim: f.Claims["steady"], Node: "node-2.lan"})
	f.Step(13*m + 11*time.Second)
	f.Do(decide.ExpireDeadline{Claim: f.Claims["first"]})
	f.Step(13*m + 20*time.Second)
	f.Do(decide.FireShutdown{Claim: f.Claims["first"], Force: true, Cause: "forced shutdown of a failed claim"})
	f.Step(14 * m)
	cl = f.Do(decide.IncreaseSize{Group: "homelab", Delta: 2, RequestedBy: "cluster-autoscaler"}).Claims()
	f.Claims["second"], f.Claims["broken"] = f.claimOn(cl, "node-1.lan"), f.claimOn(cl, "node-3.lan")
	f.Step(14*m + 10*time.Second)
	f.Do(decide.BootClaim{Claim: f.Claims["second"]})
	f.Do(decide.BootClaim{Claim: f.Claims["broken"]})
	f.Step(17*m + 22*time.Second)
	f.Do(decide.MarkReady{Claim: f.Claims["second"], Node: "node-1.lan"})
	f.Step(19 * m)
	f.Do(decide.FailClaim{Claim: f.Claims["broken"], Reason: projections.ReasonStartupJobFailed, Message: "Job node-3 start: BackoffLimitExceeded", ForceShutdown: true, Cause: "startup Job failed"})
	f.Step(74 * m)
	f.Do(decide.CollectClaim{Claim: f.Claims["first"]})
	f.Step(120 * m)
	f.Do(decide.DeleteNodes{Group: "homelab", Nodes: []decide.NodeRef{{Name: "node-1.lan"}}, RequestedBy: "cluster-autoscaler"})
	f.Step(120*m + 5*time.Second)
	f.Do(decide.FireShutdown{Claim: f.Claims["second"], Cause: "scale-down"})
	f.Step(123*m + 5*time.Second)
	f.Do(decide.FireShutdown{Claim: f.Claims["second"], After: decide.JobName(f.Claims["second"], "stop", 1), Cause: "scale-down"})
	f.Step(124 * m)
	f.Do(decide.CompleteClaim{Claim: f.Claims["second"], Reason: projections.ReasonScaledDown})
	f.Step(125 * m)
	f.Do(decide.Decommission{Slot: "node-3.lan", By: "alice", Reason: "bad PSU"})
	f.Step(126 * m)
	cl = f.Do(decide.ManualClaim{Slot: "gpu-1", By: "bob", Reason: "training run"}).Claims()
	f.Claims["manual"] = f.claimOn(cl, "gpu-1")
	f.Step(130 * m)
}

func (f *Fixture) claimOn(claims []string, slot string) string {
	f.T.Helper()
	var out string
	f.H.Read(func(s *projections.State) {
		for _, c := range claims {
			if cl := s.Claims[c]; cl != nil && cl.Slot == slot {
				out = c
			}
		}
	})
	if out == "" {
		f.T.Fatalf("no claim of %v is on %s", claims, slot)
	}
	return out
}
