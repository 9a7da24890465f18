package telemetry_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/handlers/telemetry"
)

// The simulator's loop (what serve runs without a cluster) reports its work
// queue: each claim's reaction, the work items, and the queue's depth.
func TestReactorQueueMetrics(t *testing.T) {
	h := handlerstest.New(t)
	tel := setup(t, telemetry.Options{Prometheus: true})
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Log: quiet, Metrics: tel.Metrics})
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("world: %v", err)
		}
		w.Stop()
	})

	h.Declare("g", events.GroupSpec{}, "a", "b", "c")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 3, RequestedBy: "test"})

	count := regexp.MustCompile(`(?m)^claimstream_reaction_seconds_count (\d+)$`)
	var body string
	eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		body = scrape(t, tel)
		m := count.FindStringSubmatch(body)
		if m == nil {
			return fmt.Errorf("no reaction recorded:\n%s", body)
		}
		if n, _ := strconv.Atoi(m[1]); n < 3 {
			return fmt.Errorf("reactions: %d, want at least one per claimed slot (3)", n)
		}
		return nil
	})
	for _, re := range []string{
		`(?m)^claimstream_reactor_work_duration_seconds_count\{outcome="ok",work="slot"\} [1-9]\d*$`,
		`(?m)^claimstream_reactor_work_duration_seconds_count\{outcome="ok",work="strays"\} [1-9]\d*$`,
		`(?m)^claimstream_reactor_queue_depth \d+$`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("scrape lacks %s", re)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}
