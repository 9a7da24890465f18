package rest

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestAuthLimiterStaysBounded: a spray from 20,000 addresses keeps at most
// MaxClients of them, the most recent; idle ones expire.
func TestAuthLimiterStaysBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	l := NewAuthLimiter(AuthLimitOptions{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d:9", i>>16, (i>>8)&255, i&255) }
	for i := 0; i < 20000; i++ {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = addr(i)
		l.Check(req, AuthSurfaceAPI, func() bool { return false }, "refused")
	}
	if n := l.clientCount(); n != DefaultAuthMaxClients {
		t.Fatalf("%d addresses remembered after 20,000, want the cap %d", n, DefaultAuthMaxClients)
	}
	has := func(i int) bool { _, ok := l.clients.Get(ClientKey(addr(i))); return ok }
	if has(0) || !has(19999) {
		t.Errorf("first remembered %v, last remembered %v: want the oldest evicted, the newest kept", has(0), has(19999))
	}
	clk.Step(DefaultAuthClientIdle + time.Second)
	if n := l.clientCount(); n != 0 {
		t.Errorf("%d addresses remembered after the idle time, want 0", n)
	}
}

// TestAuthLimiterLogsOncePerEpisode: a guesser's first refusals are logged
// one by one, then one line says it is throttled, then one summary a
// minute; a pause long enough to refill the budget starts a new episode.
func TestAuthLimiterLogsOncePerEpisode(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	var buf bytes.Buffer
	l := NewAuthLimiter(AuthLimitOptions{Clock: clk, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "192.0.2.9:1000"
	guess := func() {
		l.Check(req, AuthSurfaceAPI, func() bool { return false }, "api request refused: wrong token")
	}
	for i := 0; i < 100; i++ {
		guess()
	}
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
	count := func(sub string) int {
		n := 0
		for _, line := range lines() {
			if strings.Contains(line, sub) {
				n++
			}
		}
		return n
	}
	if got := count("api request refused: wrong token"); got != authWarnPerEpisode {
		t.Errorf("%d refusal lines, want %d:\n%s", got, authWarnPerEpisode, buf.String())
	}
	if got := count("throttling failed authentications from 192.0.2.9: 10 refused in the last 1 s"); got != 1 {
		t.Errorf("%d throttling lines, want 1:\n%s", got, buf.String())
	}
	if len(lines()) != authWarnPerEpisode+2 {
		t.Errorf("%d lines for 100 guesses, want %d:\n%s", len(lines()), authWarnPerEpisode+2, buf.String())
	}
	// Guessing on, one a second for a minute: one summary.
	for i := 0; i < 61; i++ {
		clk.Step(time.Second)
		guess()
		guess()
	}
	if got := count("failed authentications from 192.0.2.9 go on:"); got != 1 {
		t.Errorf("%d summaries after a minute, want 1:\n%s", got, buf.String())
	}
	// Quiet until the budget is full: a new episode logs afresh.
	clk.Step(11 * time.Second)
	buf.Reset()
	for i := 0; i < 20; i++ {
		guess()
	}
	if got := count("api request refused: wrong token"); got != authWarnPerEpisode {
		t.Errorf("new episode: %d refusal lines, want %d:\n%s", got, authWarnPerEpisode, buf.String())
	}
	if got := count("throttling failed authentications from 192.0.2.9"); got != 1 {
		t.Errorf("new episode: %d throttling lines, want 1:\n%s", got, buf.String())
	}
}

// TestConcurrentGuessesStayWithinTheBudget: of a hundred wrong guesses at
// once from one address, ten are refused and the rest throttled, no more.
func TestConcurrentGuessesStayWithinTheBudget(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	l := NewAuthLimiter(AuthLimitOptions{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	var compared, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = "192.0.2.1:1"
			<-start
			_, outcome := l.Check(req, AuthSurfaceAPI, func() bool {
				compared.Add(1)
				runtime.Gosched() // let the others in, were they not kept out
				return false
			}, "refused")
			if outcome == AuthRefused {
				refused.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := refused.Load(); n != DefaultAuthFailureBurst {
		t.Errorf("%d refusals for 100 concurrent guesses, want %d", n, DefaultAuthFailureBurst)
	}
	// Every token is compared: the right one always passes.
	if n := compared.Load(); n != 100 {
		t.Errorf("%d tokens compared, want 100", n)
	}
}
