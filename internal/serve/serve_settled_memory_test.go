package serve

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// The settled collection runs settleDelay after serving starts, once, and
// not at all when serve stops first.
func TestReleaseSettledMemoryRunsOnceAfterTheDelay(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var out logcapture.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		releaseSettledMemory(context.Background(), slog.New(slog.NewTextHandler(&out, nil)), clk)
	}()
	eventstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if !clk.HasWaiters() {
			return errors.New("no timer set")
		}
		return nil
	})
	// Short of the delay the timer has not fired: it still waits.
	clk.Step(settleDelay - time.Second)
	if !clk.HasWaiters() {
		t.Fatalf("the timer fired before the delay: %s", out.String())
	}
	clk.Step(time.Second)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("not collected 30s after the delay passed")
	}
	if n := strings.Count(out.String(), `msg="settled memory returned to the system"`); n != 1 {
		t.Fatalf("want one line, got %d: %s", n, out.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out = logcapture.Buffer{}
	releaseSettledMemory(ctx, slog.New(slog.NewTextHandler(&out, nil)), clk)
	if out.String() != "" {
		t.Fatalf("collected after serve stopped: %s", out.String())
	}
}
