package serve

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestStartupTimerLogsEachPhase(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	timer := newStartupTimer(log, clk)
	clk.SetTime(clk.Now().Add(1500 * time.Millisecond))
	timer.done("embedded server")
	clk.SetTime(clk.Now().Add(250 * time.Millisecond))
	timer.done("views", "seq", 42)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		`msg="start-up phase" phase="embedded server" took=1.5s since_start=1.5s`,
		`msg="start-up phase" phase=views took=250ms since_start=1.75s seq=42`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
	var none *startupTimer
	none.done("nothing") // a plane started without serve: no timer, no line
}
