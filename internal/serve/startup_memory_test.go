package serve

import (
	"bytes"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
)

var startupGarbage [][]byte

// TestReleaseStartupMemoryReturnsGarbage: after a start-up's worth of
// garbage (64 MiB allocated and dropped), releaseStartupMemory hands the
// freed pages back to the system at once and says so in one log line.
func TestReleaseStartupMemoryReturnsGarbage(t *testing.T) {
	for range 64 {
		startupGarbage = append(startupGarbage, bytes.Repeat([]byte{1}, 1<<20))
	}
	startupGarbage = nil
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var out strings.Builder
	releaseStartupMemory(slog.New(slog.NewTextHandler(&out, nil)), nil)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	held := func(m runtime.MemStats) uint64 { return m.HeapSys - m.HeapReleased }
	t.Logf("heap held from the system: %d MiB before, %d MiB after; %s", held(before)>>20, held(after)>>20, strings.TrimSpace(out.String()))
	if held(before)-min(held(before), held(after)) < 48<<20 {
		t.Fatalf("heap held from the system went from %d to %d MiB: the garbage was not returned", held(before)>>20, held(after)>>20)
	}
	if !strings.Contains(out.String(), `msg="start-up memory returned to the system"`) {
		t.Fatalf("log: %q", out.String())
	}
}

// TestReleaseStartupMemoryWaitsForTheTimelineIndex: the release waits for
// the timeline index's first build (its garbage is the start's too).
func TestReleaseStartupMemoryWaitsForTheTimelineIndex(t *testing.T) {
	built := make(chan struct{})
	var out logcapture.Buffer
	done := make(chan struct{})
	go func() { defer close(done); releaseStartupMemory(slog.New(slog.NewTextHandler(&out, nil)), built) }()
	eventstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		select {
		case <-done:
			t.Fatalf("released before the timeline index was built: %s", out.String())
		default:
		}
		if !blockedIn("releaseStartupMemory", "chan receive") {
			return errors.New("the release does not wait for the timeline index")
		}
		return nil
	})
	if out.String() != "" {
		t.Fatalf("released before the timeline index was built: %s", out.String())
	}
	close(built)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("not released 30s after the timeline index was built")
	}
	if !strings.Contains(out.String(), `msg="start-up memory returned to the system"`) {
		t.Fatalf("log: %q", out.String())
	}
}
