package handlers_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/decide/decidetest"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	poolfile "github.com/claimstream/claimstream/handlers/pool"
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
		h := handlerstest.OnServer(t, srv, eventlog.StoreConfig{Stream: fmt.Sprintf("P%d", n), Prefix: fmt.Sprintf("p%d", n)})
		groups := map[string][]string{"g1": {"a", "b.lan", "c"}, "g2": {"d", "e"}}
		// The pool is a pool file applied through the command service, and
		// applied again with other sizes during the run ("repool").
		provision := events.Duration(rapid.SampledFrom([]time.Duration{0, 15 * time.Minute}).Draw(rt, "g1.provision"))
		applyPool(rt, h, groups, map[string]events.GroupSpec{
			"g1": {MinSize: rapid.IntRange(0, 1).Draw(rt, "g1.min"), MaxNodeProvisionTime: provision},
			"g2": {MaxSize: rapid.IntRange(0, 2).Draw(rt, "g2.max")},
		})
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
		exec := func(cmd decide.Command) {
			if _, err := h.Exec(cmd); err != nil && decide.CodeOf(err) == 0 {
				rt.Fatalf("%#v: %v", cmd, err)
			}
		}
		check := func() {
			h.Read(func(s *projections.State) {
				if err := decidetest.CheckInvariants(s); err != nil {
					rt.Fatal(err)
				}
				// The slot's Node, under whatever name, maps back to it.
				for _, name := range allSlots {
					sl := s.Slots[name]
					for _, ref := range []decide.NodeRef{{Name: sl.NodeName()}, {ProviderID: sl.CurrentProviderID()}} {
						if got, ok := s.SlotForNode(ref.Name, ref.ProviderID); !ok || got.Name != name {
							rt.Fatalf("node %+v of slot %s maps to %v", ref, name, got)
						}
					}
				}
			})
			if live, rebuilt := h.Canonical(), h.Rebuilt(); !bytes.Equal(live, rebuilt) {
				rt.Fatalf("invariant 6: rebuild differs from the live views:\n%s", decidetest.Diff(string(rebuilt), string(live)))
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"increase": func(t *rapid.T) {
				exec(decide.IncreaseSize{Group: group.Draw(t, "group"), Delta: rapid.IntRange(-1, 4).Draw(t, "delta"), RequestedBy: "ca"})
			},
			"decrease": func(t *rapid.T) {
				exec(decide.DecreaseTargetSize{Group: group.Draw(t, "group"), Delta: rapid.IntRange(-3, 0).Draw(t, "delta"), RequestedBy: "ca"})
			},
			"delete": func(t *rapid.T) {
				picked := rapid.SliceOfNDistinct(slot, 1, 3, func(s string) string { return s }).Draw(t, "nodes")
				var nodes []decide.NodeRef
				for _, sl := range picked {
					switch rapid.IntRange(0, 2).Draw(t, "by") {
					case 0:
						nodes = append(nodes, decide.NodeRef{Name: "homelab://" + sl, ProviderID: "homelab://" + sl})
					case 1:
						nodes = append(nodes, decide.NodeRef{Name: sl})
					default: // the Node cluster-autoscaler sees: maybe a host under another name
						h.Read(func(s *projections.State) {
							nodes = append(nodes, decide.NodeRef{Name: s.Slots[sl].NodeName(), ProviderID: s.Slots[sl].CurrentProviderID()})
						})
					}
				}
				exec(decide.DeleteNodes{Group: group.Draw(t, "group"), Nodes: nodes, RequestedBy: "ca"})
			},
			"manual":       func(t *rapid.T) { exec(decide.ManualClaim{Slot: slot.Draw(t, "slot"), By: "alice"}) },
			"deleteClaim":  func(t *rapid.T) { exec(decide.DeleteClaim{Claim: claimOf(slot.Draw(t, "slot")), By: "alice"}) },
			"decommission": func(t *rapid.T) { exec(decide.Decommission{Slot: slot.Draw(t, "slot"), By: "ops"}) },
			"recommission": func(t *rapid.T) { exec(decide.Recommission{Slot: slot.Draw(t, "slot"), By: "ops"}) },
			"boot":         func(t *rapid.T) { exec(decide.BootClaim{Claim: claimOf(slot.Draw(t, "slot"))}) },
			"expectHost": func(t *rapid.T) {
				// The startup Job reports a host under another name.
				sl := slot.Draw(t, "slot")
				id := "i-" + strings.ReplaceAll(sl, ".", "-")
				exec(decide.ExpectHost{Claim: claimOf(sl), Node: "ip-" + id, ProviderID: "aws:///eu-west-1a/" + id, InstanceID: id})
			},
			"ready": func(t *rapid.T) {
				sl := slot.Draw(t, "slot")
				exec(decide.MarkReady{Claim: claimOf(sl), Node: sl})
			},
			"fail": func(t *rapid.T) {
				exec(decide.FailClaim{Claim: claimOf(slot.Draw(t, "slot")), Reason: rapid.SampledFrom([]string{projections.ReasonStartupJobFailed, projections.ReasonJobTimeout, projections.ReasonReadinessGateTimeout, projections.ReasonMachineGone}).Draw(t, "reason"), ForceShutdown: true})
			},
			"expire":   func(t *rapid.T) { exec(decide.ExpireDeadline{Claim: claimOf(slot.Draw(t, "slot"))}) },
			"complete": func(t *rapid.T) { exec(decide.CompleteClaim{Claim: claimOf(slot.Draw(t, "slot"))}) },
			"collect":  func(t *rapid.T) { exec(decide.CollectClaim{Claim: claimOf(slot.Draw(t, "slot"))}) },
			"advance": func(t *rapid.T) {
				h.Clock.Step(rapid.SampledFrom([]time.Duration{time.Second, time.Minute, 5 * time.Minute, 13 * time.Minute, 31 * time.Minute, 2 * time.Hour}).Draw(t, "by"))
			},
			"repool": func(t *rapid.T) {
				specs := map[string]events.GroupSpec{}
				for _, g := range []string{"g1", "g2"} {
					n := len(groups[g])
					maxSize := rapid.IntRange(0, n).Draw(t, g+".max")
					limit := n
					if maxSize > 0 {
						limit = maxSize
					}
					specs[g] = events.GroupSpec{MinSize: rapid.IntRange(0, limit).Draw(t, g+".min"), MaxSize: maxSize}
				}
				spec := specs["g1"]
				spec.MaxNodeProvisionTime = provision
				specs["g1"] = spec
				applyPool(t, h, groups, specs)
			},
			"": func(t *rapid.T) { check() },
		})
	})
}

// poolFile is the pool file of groups (group -> its slots, each with the
// providerID homelab://<slot>) with the given specs.
func poolFile(groups map[string][]string, specs map[string]events.GroupSpec) *poolfile.Config {
	cfg := &poolfile.Config{Source: "pool.yaml"}
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		spec := specs[g]
		spec.Scaler = events.ScalerClusterAutoscaler
		spec.ReadinessTaints = []events.Taint{}
		cfg.Groups = append(cfg.Groups, poolfile.Group{Name: g, Spec: spec})
		for _, sl := range groups[g] {
			cfg.Slots = append(cfg.Slots, poolfile.Slot{Name: sl, Group: g, Spec: events.SlotSpec{ProviderID: "homelab://" + sl}})
		}
	}
	return cfg
}

// applyPool applies the pool file of groups with specs. A refusal must be
// the maxSize rule's (a maxSize below the live claims), and change nothing.
func applyPool(t *rapid.T, h *handlerstest.Harness, groups map[string][]string, specs map[string]events.GroupSpec) {
	a := &poolfile.Applier{Service: h.Service, Views: h.Views, Clock: h.Clock, Log: quietLog}
	before := h.Views.Seq()
	_, err := a.Apply(context.Background(), poolFile(groups, specs))
	var ce *poolfile.ConfigError
	switch {
	case err == nil:
	case errors.As(err, &ce) && strings.Contains(err.Error(), "more than the new maxSize"):
		if h.Views.Seq() != before {
			t.Fatalf("a refused pool file moved the views from %d to %d: %v", before, h.Views.Seq(), err)
		}
	default:
		t.Fatalf("apply pool file: %v", err)
	}
}

var quietLog = slog.New(slog.DiscardHandler)

// TestPropertyPoolAboveBatchLimit applies random pool files of more than
// eventlog.MaxEventsPerAppend slots to a real JetStream store, then a second
// file that moves slots between groups, relabels them, adds or drops groups
// (their slots retired and declared again), each after a random number of
// single group decisions (a process stopped mid-apply). Before every full
// apply no slot is in an undeclared group; after it the views are the file
// (applying it again plans nothing) and the log folded from zero equals the
// views. Each case writes thousands of events, so it runs a twelfth of the
// checks of the other properties (-rapid.checks).
func TestPropertyPoolAboveBatchLimit(t *testing.T) {
	fewerChecks(t, 12)
	srv := eventstest.StartServer(t)
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		n := streams.Add(1)
		h := handlerstest.OnServer(t, srv, eventlog.StoreConfig{Stream: fmt.Sprintf("P%d", n), Prefix: fmt.Sprintf("p%d", n)})
		a := &poolfile.Applier{Service: h.Service, Views: h.Views, Clock: h.Clock, Log: quietLog}
		slots := rapid.IntRange(eventlog.MaxEventsPerAppend+1, eventlog.MaxEventsPerAppend+150).Draw(rt, "slots")
		for step := range 2 {
			cfg := bigPoolFile(slots,
				rapid.IntRange(1, 4).Draw(rt, "groups"), rapid.IntRange(0, 3).Draw(rt, "shift"), rapid.IntRange(0, 1).Draw(rt, "rev"))
			for range rapid.IntRange(0, 2).Draw(rt, "stoppedAfter") {
				g := rapid.SampledFrom(cfg.Groups).Draw(rt, "stoppedIn").Name
				res, err := h.Service.Execute(ctx, poolfile.GroupCommand{Config: cfg, Group: g})
				if err != nil {
					rt.Fatalf("step %d: decision for %s: %v", step, g, err)
				}
				if len(res.Events) > eventlog.MaxEventsPerAppend {
					rt.Fatalf("step %d: one decision wrote %d events", step, len(res.Events))
				}
			}
			h.Read(func(s *projections.State) {
				for name, sl := range s.Slots {
					if g, ok := s.ActiveGroup(sl.Group); !sl.Retired && (!ok || !slices.Contains(g.Slots, name)) {
						rt.Fatalf("step %d: slot %s is in group %s, which is not declared", step, name, sl.Group)
					}
				}
			})
			if _, err := a.Apply(ctx, cfg); err != nil {
				rt.Fatalf("step %d: apply: %v", step, err)
			}
			h.Read(func(s *projections.State) {
				if ws, err := poolfile.Reconcile(cfg, s, h.Clock.Now()); err != nil || ws != nil {
					rt.Fatalf("step %d: after the apply the file still asks for %d writes (%v)", step, len(ws), err)
				}
			})
		}
		if live, rebuilt := h.Canonical(), h.Rebuilt(); !bytes.Equal(live, rebuilt) {
			rt.Fatalf("invariant 6: rebuild differs from the live views:\n%s", decidetest.Diff(string(rebuilt), string(live)))
		}
	})
}

// bigPoolFile is a pool file of slots n-0.. spread over groups big-0..;
// shift moves slots between groups, rev relabels every slot.
func bigPoolFile(slots, groups, shift, rev int) *poolfile.Config {
	cfg := &poolfile.Config{Source: "pool.yaml"}
	for g := range groups {
		cfg.Groups = append(cfg.Groups, poolfile.Group{Name: fmt.Sprintf("big-%d", g), Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler, ReadinessTaints: []events.Taint{}}})
	}
	for i := range slots {
		cfg.Slots = append(cfg.Slots, poolfile.Slot{Name: fmt.Sprintf("n-%d", i), Group: cfg.Groups[(i+shift)%groups].Name, Spec: events.SlotSpec{
			ProviderID: fmt.Sprintf("homelab://n-%d", i), Labels: map[string]string{"rev": strconv.Itoa(rev)}}})
	}
	return cfg
}

// fewerChecks divides rapid's number of checks (-rapid.checks, default
// 100) by div for this test, at least one.
func fewerChecks(t *testing.T, div int) {
	f := flag.Lookup("rapid.checks")
	if f == nil {
		t.Fatal("rapid registers no -rapid.checks flag")
	}
	was := f.Value.String()
	n, err := strconv.Atoi(was)
	if err != nil {
		t.Fatalf("-rapid.checks %q: %v", was, err)
	}
	if err := flag.Set("rapid.checks", strconv.Itoa(max(1, n/div))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("rapid.checks", was) })
}
