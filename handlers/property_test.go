package handlers_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
)

var streams atomic.Int64

// TestPropertyInvariants drives random sequences of every command and
// lifecycle move, with clock advances, through the command service against
// a real JetStream store, and checks after every step: at most one live
// claim per slot (invariant 1), target size == live wanting claims and
// never above maxSize (invariant 2), and that the log folded from zero
// equals the incremental views byte for byte (invariant 6).
func TestPropertyInvariants(t *testing.T) {
	srv := eventstest.StartServer(t)
	rapid.Check(t, func(rt *rapid.T) {
		n := streams.Add(1)
		h := handlerstest.OnServer(t, srv, events.StoreConfig{Stream: fmt.Sprintf("P%d", n), Prefix: fmt.Sprintf("p%d", n)})
		groups := map[string][]string{"g1": {"a", "b.lan", "c"}, "g2": {"d", "e"}}
		h.Declare("g1", events.GroupSpec{MinSize: rapid.IntRange(0, 1).Draw(rt, "g1.min"), MaxNodeProvisionTime: events.Duration(rapid.SampledFrom([]time.Duration{0, 15 * time.Minute}).Draw(rt, "g1.provision"))}, groups["g1"]...)
		h.Declare("g2", events.GroupSpec{MaxSize: rapid.IntRange(0, 2).Draw(rt, "g2.max")}, groups["g2"]...)
		allSlots := []string{"a", "b.lan", "c", "d", "e"}
		slot := rapid.SampledFrom(allSlots)
		group := rapid.SampledFrom([]string{"g1", "g2", "nope"})

		claimOf := func(sl string) string {
			var name string
			h.Read(func(s *projections.State) {
				if c := s.LiveOfSlot(sl); c != nil {
					name = c.Name
				} else if x := s.Slots[sl]; x != nil && len(x.Claims) > 0 {
					name = x.Claims[len(x.Claims)-1]
				}
			})
			return name
		}
		exec := func(cmd handlers.Command) {
			if _, err := h.Exec(cmd); err != nil && handlers.CodeOf(err) == 0 {
				rt.Fatalf("%#v: %v", cmd, err)
			}
		}
		check := func() {
			h.Read(func(s *projections.State) {
				if err := checkInvariants(s); err != nil {
					rt.Fatal(err)
				}
				// The slot's Node, under whatever name, maps back to it.
				for _, name := range allSlots {
					sl := s.Slots[name]
					for _, ref := range []handlers.NodeRef{{Name: sl.NodeName()}, {ProviderID: sl.CurrentProviderID()}} {
						if got, ok := s.SlotForNode(ref.Name, ref.ProviderID); !ok || got.Name != name {
							rt.Fatalf("node %+v of slot %s maps to %v", ref, name, got)
						}
					}
				}
			})
			if live, rebuilt := h.Canonical(), h.Rebuilt(); !bytes.Equal(live, rebuilt) {
				rt.Fatalf("invariant 6: rebuild differs from the live views:\n%s", diff(string(rebuilt), string(live)))
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"increase": func(t *rapid.T) {
				exec(handlers.IncreaseSize{Group: group.Draw(t, "group"), Delta: rapid.IntRange(-1, 4).Draw(t, "delta"), RequestedBy: "ca"})
			},
			"decrease": func(t *rapid.T) {
				exec(handlers.DecreaseTargetSize{Group: group.Draw(t, "group"), Delta: rapid.IntRange(-3, 0).Draw(t, "delta"), RequestedBy: "ca"})
			},
			"delete": func(t *rapid.T) {
				picked := rapid.SliceOfNDistinct(slot, 1, 3, func(s string) string { return s }).Draw(t, "nodes")
				var nodes []handlers.NodeRef
				for _, sl := range picked {
					switch rapid.IntRange(0, 2).Draw(t, "by") {
					case 0:
						nodes = append(nodes, handlers.NodeRef{Name: "homelab://" + sl, ProviderID: "homelab://" + sl})
					case 1:
						nodes = append(nodes, handlers.NodeRef{Name: sl})
					default: // the Node cluster-autoscaler sees: maybe a host under another name
						h.Read(func(s *projections.State) {
							nodes = append(nodes, handlers.NodeRef{Name: s.Slots[sl].NodeName(), ProviderID: s.Slots[sl].CurrentProviderID()})
						})
					}
				}
				exec(handlers.DeleteNodes{Group: group.Draw(t, "group"), Nodes: nodes, RequestedBy: "ca"})
			},
			"manual":       func(t *rapid.T) { exec(handlers.ManualClaim{Slot: slot.Draw(t, "slot"), By: "alice"}) },
			"deleteClaim":  func(t *rapid.T) { exec(handlers.DeleteClaim{Claim: claimOf(slot.Draw(t, "slot")), By: "alice"}) },
			"decommission": func(t *rapid.T) { exec(handlers.Decommission{Slot: slot.Draw(t, "slot"), By: "ops"}) },
			"recommission": func(t *rapid.T) { exec(handlers.Recommission{Slot: slot.Draw(t, "slot"), By: "ops"}) },
			"boot":         func(t *rapid.T) { exec(handlers.BootClaim{Claim: claimOf(slot.Draw(t, "slot"))}) },
			"expectHost": func(t *rapid.T) {
				// The startup Job reports a host under another name.
				sl := slot.Draw(t, "slot")
				id := "i-" + strings.ReplaceAll(sl, ".", "-")
				exec(handlers.ExpectHost{Claim: claimOf(sl), Node: "ip-" + id, ProviderID: "aws:///eu-west-1a/" + id, InstanceID: id})
			},
			"ready": func(t *rapid.T) {
				sl := slot.Draw(t, "slot")
				exec(handlers.MarkReady{Claim: claimOf(sl), Node: sl})
			},
			"fail": func(t *rapid.T) {
				exec(handlers.FailClaim{Claim: claimOf(slot.Draw(t, "slot")), Reason: rapid.SampledFrom([]string{projections.ReasonStartupJobFailed, projections.ReasonJobTimeout, projections.ReasonReadinessGateTimeout, projections.ReasonMachineGone}).Draw(t, "reason"), ForceShutdown: true})
			},
			"expire":   func(t *rapid.T) { exec(handlers.ExpireDeadline{Claim: claimOf(slot.Draw(t, "slot"))}) },
			"complete": func(t *rapid.T) { exec(handlers.CompleteClaim{Claim: claimOf(slot.Draw(t, "slot"))}) },
			"collect":  func(t *rapid.T) { exec(handlers.CollectClaim{Claim: claimOf(slot.Draw(t, "slot"))}) },
			"advance": func(t *rapid.T) {
				h.Clock.Step(rapid.SampledFrom([]time.Duration{time.Second, time.Minute, 5 * time.Minute, 13 * time.Minute, 31 * time.Minute, 2 * time.Hour}).Draw(t, "by"))
			},
			"": func(t *rapid.T) { check() },
		})
	})
}
