package sim_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
)

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

var podSpec = json.RawMessage(`{"containers":[{"name":"power","image":"busybox:1.37","command":["/bin/true"]}]}`)

// declare writes a group and its slots, each with startup and shutdown
// pod specs (handlerstest.Declare declares slots without them).
func declare(t testing.TB, h *handlerstest.Harness, group string, spec events.GroupSpec, slots ...string) {
	t.Helper()
	h.DeclareWith(group, spec, func(sl string) events.SlotSpec {
		return events.SlotSpec{
			ProviderID: "homelab://" + sl, Address: "192.0.2.1",
			Startup:  &events.JobSpec{PodSpec: podSpec},
			Shutdown: &events.JobSpec{PodSpec: podSpec},
			Labels:   map[string]string{"claimstream.dev/rack": "a"},
		}
	}, slots...)
}

// newWorld starts a harness and a simulated world on it.
func newWorld(t testing.TB, timing sim.Timing) (*handlerstest.Harness, *sim.World) {
	t.Helper()
	h := handlerstest.New(t)
	return h, startWorld(t, h, timing)
}

func startWorld(t testing.TB, h *handlerstest.Harness, timing sim.Timing) *sim.World {
	t.Helper()
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Timing: timing, Log: quiet})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// claimOf is the newest claim of a slot, copied.
func claimOf(h *handlerstest.Harness, slot string) projections.Claim {
	var c projections.Claim
	h.Read(func(s *projections.State) {
		if sl := s.Slots[slot]; sl != nil && len(sl.Claims) > 0 {
			c = *s.Claims[sl.Claims[len(sl.Claims)-1]]
			c.Timeline = append([]projections.Step(nil), c.Timeline...)
		}
	})
	return c
}

func phaseIs(slot string, p projections.Phase) func(*projections.State) bool {
	return func(s *projections.State) bool {
		sl := s.Slots[slot]
		if sl == nil || len(sl.Claims) == 0 {
			return false
		}
		return s.Claims[sl.Claims[len(sl.Claims)-1]].Phase == p
	}
}

func runUntil(t testing.TB, w *sim.World, max time.Duration, what string, cond func(*projections.State) bool) {
	t.Helper()
	ok, err := w.RunUntil(context.Background(), max, cond)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("not reached within %s: %s (world: %s)", max, what, w.Sim)
	}
}

func types(c projections.Claim) []events.Type {
	var out []events.Type
	for _, s := range c.Timeline {
		out = append(out, s.Type)
	}
	return out
}
