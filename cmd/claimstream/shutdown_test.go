package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventstest"
)

// TestServeWaitsForAnInFlightWebhook: SIGTERM (ctx canceled) while a
// webhook is answering: serve returns only after the delivery finished and
// was acked, then closes NATS, within a bound.
func TestServeWaitsForAnInFlightWebhook(t *testing.T) {
	var finished atomic.Bool
	started := make(chan struct{}, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if finished.Load() {
			return
		}
		select {
		case started <- struct{}{}:
		default:
		}
		// A slow receiver: the answer comes well after the shutdown began.
		time.Sleep(1500 * time.Millisecond)
		finished.Store(true)
	}))
	t.Cleanup(hook.Close)
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
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(shutdownGrace + 15*time.Second):
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
	case <-time.After(shutdownGrace + 30*time.Second):
		t.Fatal("serve did not stop after a part failed")
	}
}
