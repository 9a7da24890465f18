package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
)

// bigConfig is a hand-built pool of groups g-0.. with perGroup slots each
// (g-3-17 is slot 17 of group g-3), every slot labelled rev=rev.
func bigConfig(groups, perGroup int, rev string) *Config {
	cfg := &Config{Source: "pool.yaml"}
	for g := range groups {
		name := fmt.Sprintf("g-%d", g)
		cfg.Groups = append(cfg.Groups, Group{Name: name, Spec: groupSpec(0)})
		for i := range perGroup {
			slot := fmt.Sprintf("%s-%d", name, i)
			cfg.Slots = append(cfg.Slots, Slot{Name: slot, Group: name, Spec: events.SlotSpec{
				ProviderID: events.DefaultProviderID(slot), Labels: map[string]string{"rev": rev}}})
		}
	}
	return cfg
}

func groupSpec(maxSize int) events.GroupSpec {
	return events.GroupSpec{MaxSize: maxSize, Scaler: events.ScalerClusterAutoscaler, ReadinessTaints: []events.Taint{}}
}

func applier(h *handlerstest.Harness) *Applier {
	return &Applier{Service: h.Service, Views: h.Views, Clock: h.Clock, Log: slog.New(slog.DiscardHandler)}
}

// lastSeq is the log's last sequence.
func lastSeq(t *testing.T, h *handlerstest.Harness) uint64 {
	t.Helper()
	n, err := h.Store.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkApplied fails unless the views hold exactly cfg's groups and slots.
func checkApplied(t *testing.T, h *handlerstest.Harness, cfg *Config) {
	t.Helper()
	h.Read(func(s *projections.State) {
		if ws, err := Reconcile(cfg, s, handlerstest.Start); err != nil || ws != nil {
			t.Errorf("after the apply the file still asks for %d writes (%v)", len(ws), err)
		}
	})
}

// TestApply10k: 10,000 slots in 100 groups apply on first start, and again
// when every slot changes, each in bounded time, through the command
// service and a real JetStream store; applying the same file again writes
// nothing. The timings are logged against a baseline (the same events
// appended straight to the store in appends of MaxEventsPerAppend, with no
// decisions and no views), with fsync off and, with
// CLAIMSTREAM_APPLY_FSYNC=1, also on, as serve runs by default
// (docs/benchmarks.md).
func TestApply10k(t *testing.T) {
	// CPU-bound and alone with its server: beside the other large one.
	t.Parallel()
	modes := []bool{false}
	if os.Getenv("CLAIMSTREAM_APPLY_FSYNC") != "" {
		modes = append(modes, true)
	}
	for _, fsync := range modes {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			srv := eventstest.StartServer(t)
			if fsync {
				srv.NoSync = false
				srv.Restart()
			}
			baseline(t, srv)
			h := handlerstest.OnServer(t, srv, eventlog.StoreConfig{})
			ctx := context.Background()
			a := applier(h)
			for _, step := range []struct {
				name string
				cfg  *Config
				want int
			}{
				{"first start", bigConfig(100, 100, "1"), 10_100},
				{"the same file again", bigConfig(100, 100, "1"), 0},
				{"every slot changed", bigConfig(100, 100, "2"), 10_000},
			} {
				began := time.Now()
				res, err := a.Apply(ctx, step.cfg)
				took := time.Since(began)
				if err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				if res.Events != step.want || res.PlannedEvents != step.want {
					t.Errorf("%s: wrote %d events (planned %d), want %d", step.name, res.Events, res.PlannedEvents, step.want)
				}
				checkApplied(t, h, step.cfg)
				t.Logf("Apply, %s: %d events in %d groups in %v (%.0f events/s)", step.name, res.Events, res.Groups, took.Round(time.Millisecond), float64(res.Events)/took.Seconds())
				// Bounded: generous for two shared cores (ten times that
				// under the race detector); a regression to one decision
				// per slot, or to a quadratic reconcile, takes far longer.
				bound := 2 * time.Minute
				if raceEnabled {
					bound *= 10
				}
				if took > bound {
					t.Errorf("%s took %v", step.name, took)
				}
			}
		})
	}
}

// baseline appends the first start's 10,100 events straight to the store,
// in appends of MaxEventsPerAppend, and logs the time.
func baseline(t *testing.T, srv *eventstest.Server) {
	t.Helper()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{Stream: "BASELINE", Prefix: "base"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := Reconcile(bigConfig(100, 100, "1"), projections.NewState(), handlerstest.Start)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		for j := range ws[i].Events {
			ws[i].Events[j].Source = "/claimstream/test"
		}
	}
	began := time.Now()
	n := 0
	for len(ws) > 0 {
		chunk := firstAppend(ws, eventlog.MaxEventsPerAppend)
		res, err := st.AppendWrites(context.Background(), chunk...)
		if err != nil {
			t.Fatal(err)
		}
		n += len(res.Events)
		ws = ws[len(chunk):]
	}
	took := time.Since(began)
	t.Logf("baseline, Store.AppendWrites in appends of %d: %d events in %v (%.0f events/s)", eventlog.MaxEventsPerAppend, n, took.Round(time.Millisecond), float64(n)/took.Seconds())
}

// TestApplyGroupLargerThanOneAppend: a group of 2,500 slots is written in
// decisions of at most MaxEventsPerAppend events, the group first; a stop
// after the first decision leaves a safe half-applied group (declared, with
// some of its slots), and applying the file again writes exactly the rest.
func TestApplyGroupLargerThanOneAppend(t *testing.T) {
	h := handlerstest.New(t)
	ctx := context.Background()
	cfg := bigConfig(2, 1250, "1")
	cfg.Slots = append(cfg.Slots, Slot{Name: "late", Group: "g-1", Spec: events.SlotSpec{ProviderID: "homelab://late"}})
	// g-0 gets all the slots of g-1 but the last: 2,500 in one group.
	for i := range cfg.Slots[:len(cfg.Slots)-1] {
		cfg.Slots[i].Group = "g-0"
	}

	// The first decision of g-0, as a process that stops right after it.
	res, err := h.Service.Execute(ctx, GroupCommand{Config: cfg, Group: "g-0"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Events); n != eventlog.MaxEventsPerAppend {
		t.Fatalf("first decision wrote %d events, want %d", n, eventlog.MaxEventsPerAppend)
	}
	if _, ok := res.Events[0].Data.(events.GroupDeclared); !ok {
		t.Fatalf("first event is %s, want the group first", res.Events[0].Type)
	}
	h.Read(func(s *projections.State) {
		if g, ok := s.ActiveGroup("g-0"); !ok || len(g.Slots) != eventlog.MaxEventsPerAppend-1 {
			t.Fatalf("half-applied group: %+v", g)
		}
		// Half applied is safe: the declared slots are claimable, the
		// group's maxSize is what it has.
		if got := s.MaxSize("g-0"); got != eventlog.MaxEventsPerAppend-1 {
			t.Errorf("maxSize of the half-applied group %d", got)
		}
	})

	done, err := applier(h).Apply(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The rest of g-0 (1,501 slots) and g-1 with its one slot.
	if done.Events != 1501+2 || done.PlannedEvents != done.Events || done.Groups != 2 {
		t.Errorf("the second apply: %+v", done)
	}
	checkApplied(t, h, cfg)

	// A group leaving the file is retired after its 2,500 slots, in three
	// decisions again.
	before := lastSeq(t, h)
	left := &Config{Source: "pool.yaml", Groups: cfg.Groups[1:], Slots: cfg.Slots[len(cfg.Slots)-1:]}
	done, err = applier(h).Apply(ctx, left)
	if err != nil {
		t.Fatal(err)
	}
	if done.Events != 2501 {
		t.Errorf("retiring g-0 wrote %d events", done.Events)
	}
	last, err := h.Store.Get(ctx, lastSeq(t, h))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := last.Data.(events.GroupRetired); !ok || lastSeq(t, h) != before+2501 {
		t.Errorf("the last event is %s at %d, want GroupRetired at %d", last.Type, last.Seq, before+2501)
	}
	checkApplied(t, h, left)
}

// TestApplyRefusedFileWritesNothing: a file the views refuse in one group
// writes nothing in any group.
func TestApplyRefusedFileWritesNothing(t *testing.T) {
	h := handlerstest.New(t)
	ctx := context.Background()
	cfg := bigConfig(2, 3, "1")
	if _, err := applier(h).Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h.MustExec(decide.IncreaseSize{Group: "g-1", Delta: 2, RequestedBy: "ca"})
	before := lastSeq(t, h)

	changed := bigConfig(2, 3, "2")
	changed.Groups[1].Spec = groupSpec(1)
	_, err := applier(h).Apply(ctx, changed)
	var ce *ConfigError
	want := "pool.yaml: groups[1].maxSize: group g-1 has 2 live claims, more than the new maxSize 1: scale it down to 1 first (DecreaseTargetSize, DeleteNodes or deleting claims), then lower maxSize"
	if !errors.As(err, &ce) || err.Error() != want {
		t.Fatalf("got %v, want\n%s", err, want)
	}
	if got := lastSeq(t, h); got != before {
		t.Errorf("a refused file moved the log from %d to %d", before, got)
	}
}

// TestMaxSizeHoldsAgainstConcurrentIncreaseSize: cluster-autoscaler's
// IncreaseSize calls race a pool file lowering maxSize from 12 to 4, the
// file applied once the group has 0, 2, 4, 6 or 9 live claims. No point of
// the log has more live claims in the group than its maxSize: the file is
// refused past 4 (at 6 and 9 always), and once it landed IncreaseSize
// stops at 4.
func TestMaxSizeHoldsAgainstConcurrentIncreaseSize(t *testing.T) {
	for _, at := range []int{0, 2, 4, 6, 9} {
		t.Run(fmt.Sprintf("at %d live", at), func(t *testing.T) {
			h := handlerstest.New(t)
			ctx := context.Background()
			cfg := bigConfig(1, 12, "1")
			cfg.Groups[0].Spec = groupSpec(12)
			if _, err := applier(h).Apply(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			lowered := bigConfig(1, 12, "1")
			lowered.Groups[0].Spec = groupSpec(4)

			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					for range 6 {
						_, err := h.Exec(decide.IncreaseSize{Group: "g-0", Delta: 1, RequestedBy: "ca"})
						if err != nil && decide.CodeOf(err) != decide.CodeFailedPrecondition {
							t.Errorf("IncreaseSize: %v", err)
						}
					}
				})
			}
			var applyErr error
			wg.Go(func() {
				for {
					changed := h.Views.Changed()
					var live int
					h.Read(func(s *projections.State) { live = s.LiveInService("g-0") })
					if live >= at {
						break
					}
					select {
					case <-changed:
					case <-time.After(30 * time.Second):
						t.Errorf("the group never reached %d live claims (%d)", at, live)
						return
					}
				}
				_, applyErr = applier(h).Apply(ctx, lowered)
			})
			wg.Wait()
			var ce *ConfigError
			switch {
			case applyErr == nil && at <= 4:
			case applyErr != nil && errors.As(applyErr, &ce) && strings.Contains(applyErr.Error(), "more than the new maxSize 4"):
				// Refused: the group had more than 4 live claims by the
				// time the file's decision was made.
			default:
				t.Fatalf("apply at %d live claims: %v", at, applyErr)
			}

			// Fold the log from zero, checking after every event.
			s := projections.NewState()
			err := h.Store.Read(ctx, 1, 0, func(e events.Event) error {
				if err := projections.Evolve(s, e); err != nil {
					return err
				}
				if g := s.Groups["g-0"]; g != nil && g.Spec.MaxSize > 0 {
					if live := s.LiveInService("g-0"); live > g.Spec.MaxSize {
						return fmt.Errorf("seq %d (%s): %d live claims, maxSize %d", e.Seq, e.Type, live, g.Spec.MaxSize)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
