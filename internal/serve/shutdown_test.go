package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// TestServeWaitsForAnInFlightWebhook: SIGTERM (ctx canceled) while a
// webhook is answering: serve returns only after the delivery finished and
// was acked, then closes NATS, within a bound.
func TestServeWaitsForAnInFlightWebhook(t *testing.T) {
	var finished, aborted atomic.Bool
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if finished.Load() {
			return
		}
		select {
		case started <- struct{}{}:
		default:
		}
		// A slow receiver: it answers once the shutdown waits for it.
		select {
		case <-release:
			finished.Store(true)
		case <-r.Context().Done():
			aborted.Store(true)
		}
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	sinksFile := filepath.Join(t.TempDir(), "sinks.yaml")
	writeFile(t, sinksFile, "sinks:\n  - name: slow\n    url: "+hook.URL+"\n    start: all\n")
	dir := t.TempDir()
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: dir, stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn", sinks: sinksFile}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("serve ended before the webhook was called: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the webhook was not called within 60s")
	}
	cancel()
	// The sinks run beside the leader's reactors (withSinks): once those
	// have stopped and withSinks waits for the dispatcher, the stop waits
	// for the delivery in flight, and the receiver answers.
	eventstest.CheckFor(t, 30*time.Second, time.Millisecond, func() error {
		select {
		case err := <-done:
			t.Fatalf("serve returned (%v) while a webhook delivery was in flight", err)
		default:
		}
		if aborted.Load() {
			t.Fatal("the stop cut the webhook delivery in flight")
		}
		if !blockedIn("(*plane).withSinks", "chan receive") {
			return errors.New("the stop does not wait for the sinks")
		}
		return nil
	})
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(defaultShutdownTimeout + 15*time.Second):
		t.Fatal("serve did not return within its grace period")
	}
	if !finished.Load() {
		t.Fatal("serve returned while a webhook delivery was in flight")
	}

	// The delivered event was acked before NATS closed: the sink's
	// consumer, reopened on the same data dir, has acked its first event.
	js, err := jetstream.New(eventstest.StartServerOn(t, dir).Conn)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	cons, err := js.Consumer(cctx, "CLAIMSTREAM", "sink-slow")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(cctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream < 1 {
		t.Fatalf("the delivered event was not acked: ack floor %+v", info.AckFloor)
	}
}

// TestServeStopsEverythingWhenOnePartFails: a part that fails while
// serving (the metrics port is taken) stops the others in order, and serve
// returns that part's error.
func TestServeStopsEverythingWhenOnePartFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		metricsAddress: taken.Addr().String()}
	done := make(chan error, 1)
	go func() { done <- runServe(context.Background(), o) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "metrics") || !strings.Contains(err.Error(), taken.Addr().String()) {
			t.Fatalf("got %v, want the metrics listener's error", err)
		}
	case <-time.After(defaultShutdownTimeout + 30*time.Second):
		t.Fatal("serve did not stop after a part failed")
	}
}

// TestShutdownGoesOnPastAStageThatNeverReturns: a part of the intake that
// never returns holds the shutdown only for the intake's share of the
// budget; the other stages still stop, and the log names the stage and the
// part it waited for.
func TestShutdownGoesOnPastAStageThatNeverReturns(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	logs, log := logcapture.New(slog.LevelInfo)
	run := newLifecycle(log)
	run.clock = clk
	intake := run.stage(context.Background(), "intake (provider, REST API, metrics)")
	views := run.stage(context.Background(), "views")
	work := run.stage(context.Background(), "reactors and sinks")
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	intake.Go("provider", func(context.Context) error { <-hang; return nil })
	intake.Go("metrics", func(ctx context.Context) error { <-ctx.Done(); return nil })
	var workStopped, viewsStopped atomic.Bool
	work.Go("leadership", func(ctx context.Context) error { <-ctx.Done(); workStopped.Store(true); return nil })
	views.Go("views", func(ctx context.Context) error { <-ctx.Done(); viewsStopped.Store(true); return nil })

	done := make(chan struct{})
	go func() { stopServe(run, intake, work, views); close(done) }()
	// Only the intake's deadline is waited on the fake clock: the other
	// stages stop at once.
	share := newShutdownBudget(defaultShutdownTimeout).grace(clocktesting.NewFakePassiveClock(time.Now()), stepIntake)
	stepped := false
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		select {
		case <-done:
			return nil
		default:
		}
		if !stepped && clk.HasWaiters() {
			clk.Step(share)
			stepped = true
		}
		return errors.New("stopServe has not returned")
	})
	if !workStopped.Load() || !viewsStopped.Load() {
		t.Fatalf("stages after the hung one not stopped: work %t, views %t", workStopped.Load(), viewsStopped.Load())
	}
	lines := logs.Lines("shutdown stage overran its deadline", `stage="intake (provider, REST API, metrics)"`, "deadline="+share.String(), "waiting_for=provider")
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "waiting_for=provider") {
		t.Fatalf("want one line naming the intake and its provider only:\n%s", logs)
	}
	if len(logs.Lines("stopped", `stage="reactors and sinks"`)) != 1 || len(logs.Lines("stopped", "stage=views")) != 1 {
		t.Fatalf("later stages not logged as stopped:\n%s", logs)
	}
}

// TestShutdownsLastStepsAreBoundedToo: the close of NATS or telemetry that
// never returns holds the shutdown for its deadline only, and is named.
func TestShutdownsLastStepsAreBoundedToo(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	logs, log := logcapture.New(slog.LevelInfo)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	done := make(chan bool, 1)
	go func() {
		done <- closeWithin(clk, log, "embedded NATS server and the log", 10*time.Second, func() { <-hang })
	}()
	var returned bool
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		select {
		case returned = <-done:
			return nil
		default:
		}
		if clk.HasWaiters() {
			clk.Step(10 * time.Second)
		}
		return errors.New("closeWithin has not returned")
	})
	if returned || len(logs.Lines("shutdown stage overran its deadline", `stage="embedded NATS server and the log"`, "deadline=10s")) != 1 {
		t.Fatalf("returned %t; log:\n%s", returned, logs)
	}
	if !closeWithin(clk, log, "telemetry", 10*time.Second, func() {}) || len(logs.Lines("stopped", "stage=telemetry")) != 1 {
		t.Fatalf("a close that returns is not logged as stopped:\n%s", logs)
	}
}

// TestShutdownFitsItsBudget: when no step ever ends (the leader's
// hand-over, every stage, NATS and telemetry), the whole stop still ends
// within --shutdown-timeout, each step overrunning only its share, in
// order; a step that ends at once leaves its time to the later ones.
func TestShutdownFitsItsBudget(t *testing.T) {
	const total = 20 * time.Second
	begin := time.Now()
	clk := clocktesting.NewFakeClock(begin)
	logs, log := logcapture.New(slog.LevelInfo)
	run := newLifecycle(log)
	run.clock, run.budget = clk, newShutdownBudget(total)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	run.stepDown, run.handedOver = func() {}, hang
	intake := run.stage(context.Background(), "intake (provider, REST API, metrics)")
	views := run.stage(context.Background(), "views")
	work := run.stage(context.Background(), "reactors and sinks")
	for _, s := range []*stage{intake, work, views} {
		s.Go("stuck", func(context.Context) error { <-hang; return nil })
	}
	done := make(chan struct{})
	go func() {
		stopServe(run, intake, work, views)
		closeWithin(clk, log, "embedded NATS server and the log", run.budget.grace(clk, stepNATS), func() { <-hang })
		closeWithin(clk, log, "telemetry", run.budget.grace(clk, stepTelemetry), func() { <-hang })
		close(done)
	}()
	eventstest.CheckFor(t, 20*time.Second, time.Millisecond, func() error {
		select {
		case <-done:
			return nil
		default:
		}
		if clk.HasWaiters() {
			clk.Step(100 * time.Millisecond)
		}
		return errors.New("the stop has not ended")
	})
	// The clock moves in steps of 100ms: the last deadline may be passed by less.
	if took := clk.Since(begin); took > total+100*time.Millisecond {
		t.Errorf("the stop took %s on its clock, over its budget of %s", took, total)
	}
	overran := logs.Lines("shutdown stage overran its deadline")
	var order []string
	for _, l := range overran {
		for _, step := range []string{stepHandOver, "intake", "reactors and sinks", "stage=views", "NATS", "stage=telemetry"} {
			if strings.Contains(l, step) {
				order = append(order, step)
			}
		}
	}
	if want := []string{stepHandOver, "intake", "reactors and sinks", "stage=views", "NATS", "stage=telemetry"}; strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("steps that overran, in order: %q, want %q:\n%s", order, want, logs)
	}

	// Time a step leaves goes to the later ones.
	b := newShutdownBudget(total)
	pc := clocktesting.NewFakePassiveClock(begin)
	first := b.grace(pc, stepHandOver)
	later := b.grace(pc, stepIntake)
	if fresh := newShutdownBudget(total-first).grace(pc, stepIntake); later <= fresh {
		t.Errorf("the intake's share after a hand-over that took nothing is %s, not more than %s", later, fresh)
	}
}
