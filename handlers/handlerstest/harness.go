// Package handlerstest wires a real embedded JetStream store, the
// projection runner and the command service for tests, on a fake clock.
package handlerstest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// quiet drops the info logs of the runner; warnings still show.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// Start is the fake clock's first reading in every harness.
var Start = time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)

// Harness is one running pool.
type Harness struct {
	T       testing.TB
	Server  *eventstest.Server
	Store   *eventlog.Store
	Snaps   *projections.Snapshots
	Views   *projections.Runner
	Service *handlers.Service
	Clock   *clocktesting.FakeClock

	cancel context.CancelFunc
	done   chan error
	// StoreConfig names the stream; tests that share a server use their own.
	StoreConfig eventlog.StoreConfig
}

// New starts a server, the store, the views and the service.
func New(t testing.TB) *Harness {
	t.Helper()
	h := &Harness{T: t, Server: eventstest.StartServer(t), Clock: clocktesting.NewFakeClock(Start)}
	h.open()
	t.Cleanup(h.stop)
	t.Cleanup(func() { eventstest.ValidateLog(t, h.Store) })
	return h
}

// OnServer opens a harness on an existing server with its own stream.
func OnServer(t testing.TB, srv *eventstest.Server, cfg eventlog.StoreConfig) *Harness {
	t.Helper()
	h := &Harness{T: t, Server: srv, Clock: clocktesting.NewFakeClock(Start), StoreConfig: cfg}
	h.open()
	t.Cleanup(h.stop)
	t.Cleanup(func() { eventstest.ValidateLog(t, h.Store) })
	return h
}

func (h *Harness) open() {
	h.T.Helper()
	ctx := context.Background()
	js, err := jetstream.New(h.Server.Conn)
	if err != nil {
		h.T.Fatal(err)
	}
	h.Store, err = eventlog.OpenStore(ctx, js, h.StoreConfig)
	if err != nil {
		h.T.Fatal(err)
	}
	bucket := "snap-" + h.Store.Stream()
	h.Snaps, err = projections.OpenSnapshots(ctx, js, bucket)
	if err != nil {
		h.T.Fatal(err)
	}
	h.Views = projections.NewRunner(h.Store, projections.RunnerOptions{Snapshots: h.Snaps, Logger: quiet})
	if err := h.Views.Start(ctx); err != nil {
		h.T.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.Views.Run(rctx) }()
	h.Service = handlers.NewService(h.Store, h.Views, h.Clock, "/claimstream/test", quiet)
}

func (h *Harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	if err := <-h.done; err != nil {
		h.T.Errorf("projection runner: %v", err)
	}
	h.cancel = nil
}

// Restart stops the views, restarts the server on the same store dir and
// opens everything again, keeping the clock.
func (h *Harness) Restart() {
	h.T.Helper()
	h.stop()
	h.Server.Restart()
	h.open()
}

// Exec runs a command through the service.
func (h *Harness) Exec(cmd decide.Command) (handlers.Result, error) {
	return h.Service.Execute(context.Background(), cmd)
}

// MustExec runs a command and fails the test on any error.
func (h *Harness) MustExec(cmd decide.Command) handlers.Result {
	h.T.Helper()
	r, err := h.Exec(cmd)
	if err != nil {
		h.T.Fatalf("%T: %v", cmd, err)
	}
	return r
}

// Declare writes a group and its slots (providerID homelab://<slot>, no
// lifecycle Jobs).
func (h *Harness) Declare(group string, spec events.GroupSpec, slots ...string) {
	h.T.Helper()
	h.DeclareWith(group, spec, func(slot string) events.SlotSpec {
		return events.SlotSpec{ProviderID: "homelab://" + slot}
	}, slots...)
}

// DeclareWith writes a group and its slots, each with the spec slotSpec
// gives it, and waits until the views show them.
func (h *Harness) DeclareWith(group string, spec events.GroupSpec, slotSpec func(slot string) events.SlotSpec, slots ...string) {
	h.T.Helper()
	if spec.Scaler == "" {
		spec.Scaler = events.ScalerClusterAutoscaler
	}
	now := h.Clock.Now().UTC()
	var ws []events.Write
	h.Read(func(s *projections.State) {
		var gseq uint64
		if g := s.Groups[group]; g != nil {
			gseq = g.Seq
		}
		ws = append(ws, events.Write{Aggregate: events.GroupAggregate(group), Expected: gseq, Events: []events.Event{{Time: now, Data: events.GroupDeclared{Ref: events.Ref{Group: group, Cause: "test"}, Spec: spec}}}})
		for _, sl := range slots {
			var seq uint64
			if x := s.Slots[sl]; x != nil {
				seq = x.Seq
			}
			ws = append(ws, events.Write{Aggregate: events.SlotAggregate(sl), Expected: seq, Events: []events.Event{{Time: now, Data: events.SlotDeclared{Ref: events.Ref{Slot: sl, Group: group, Cause: "test"}, Spec: slotSpec(sl)}}}})
		}
	})
	res, err := h.Store.AppendWrites(context.Background(), ws...)
	if err != nil {
		h.T.Fatalf("declare %s: %v", group, err)
	}
	if err := h.Views.WaitFor(context.Background(), res.Last); err != nil {
		h.T.Fatal(err)
	}
}

// Slots names n slots with a prefix: prefix-0 .. prefix-(n-1).
func Slots(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// Read reads the views.
func (h *Harness) Read(fn func(*projections.State)) { h.Views.Read(fn) }

// Canonical returns the canonical JSON of the live views.
func (h *Harness) Canonical() []byte {
	h.T.Helper()
	var b []byte
	var err error
	h.Read(func(s *projections.State) { b, err = projections.Canonical(s) })
	if err != nil {
		h.T.Fatal(err)
	}
	return b
}

// Rebuilt returns the canonical JSON of the views folded from zero.
func (h *Harness) Rebuilt() []byte {
	h.T.Helper()
	st, err := projections.Rebuild(context.Background(), h.Store, h.Views.Seq())
	if err != nil {
		h.T.Fatal(err)
	}
	b, err := projections.Canonical(st)
	if err != nil {
		h.T.Fatal(err)
	}
	return b
}
