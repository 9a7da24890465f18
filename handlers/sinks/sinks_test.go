package sinks_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sinks"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// receiver is a webhook: it fails what it is told to fail and records what
// it accepted, in order.
type receiver struct {
	t  testing.TB
	mu sync.Mutex
	// failNext fails that many requests, whatever they carry.
	failNext int
	// failAll fails every request while set.
	failAll bool
	// failType fails every event of that type.
	failType string
	accepted []string // event ids, in the order accepted
	tries    map[string]int
	binary   int
	trace    map[string]string // id -> traceparent header
	seq      map[string]string // id -> the sequence extension
	ce       map[string]http.Header
}

func newReceiver(t testing.TB) (*receiver, *httptest.Server) {
	r := &receiver{t: t, tries: map[string]int{}, trace: map[string]string{}, seq: map[string]string{}, ce: map[string]http.Header{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ev, err := cehttp.NewEventFromHTTPRequest(req)
	if err != nil {
		r.t.Errorf("receiver: not a CloudEvent: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if err := ev.Validate(); err != nil {
		r.t.Errorf("receiver: invalid CloudEvent: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries[ev.ID()]++
	if req.Header.Get("ce-id") != "" {
		r.binary++
	}
	t, _ := events.TypeOfCEType(ev.Type())
	if r.failNext > 0 || r.failAll || string(t) == r.failType {
		if r.failNext > 0 {
			r.failNext--
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.accepted = append(r.accepted, ev.ID())
	r.trace[ev.ID()] = req.Header.Get("traceparent")
	r.seq[ev.ID()], _ = ev.Extensions()[events.ExtSequence].(string)
	r.ce[ev.ID()] = req.Header.Clone()
	w.WriteHeader(http.StatusAccepted)
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.accepted)
}

func (r *receiver) triesOf(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries[id]
}

// want lists the ids of the log's events the sink receives, in log order.
func want(t testing.TB, st *eventlog.Store, s sinks.Sink) []string {
	t.Helper()
	var ids []string
	err := st.Read(context.Background(), 1, 0, func(e events.Event) error {
		if s.Wants(e) {
			ids = append(ids, e.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func sinkConfig(t testing.TB, yaml string) sinks.Config {
	t.Helper()
	cfg, err := sinks.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// running is a dispatcher in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t testing.TB, h *handlerstest.Harness, cfg sinks.Config, clk clock.Clock, m sinks.Metrics) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &sinks.Dispatcher{JS: h.Store.JetStream(), Store: h.Store, Config: cfg, Clock: clk, Metrics: m, Logger: quiet, FetchWait: 200 * time.Millisecond}
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	if err := <-r.done; err != nil {
		panic(fmt.Sprintf("dispatcher: %v", err))
	}
	r.cancel = nil
}

type counts struct {
	mu                          sync.Mutex
	failed, delivered, deadLett map[string]int
}

func newCounts() *counts {
	return &counts{failed: map[string]int{}, delivered: map[string]int{}, deadLett: map[string]int{}}
}
func (c *counts) DeliveryFailed(s string) { c.mu.Lock(); c.failed[s]++; c.mu.Unlock() }
func (c *counts) Delivered(s string)      { c.mu.Lock(); c.delivered[s]++; c.mu.Unlock() }
func (c *counts) DeadLettered(s string)   { c.mu.Lock(); c.deadLett[s]++; c.mu.Unlock() }
func (c *counts) get(m map[string]int, s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[s]
}

// lifecycle writes a group, two claims, their boots and a ready and a
// failure: ClaimCreated x2, ClaimBooting x2, ClaimReady, ClaimFailed.
func lifecycle(t testing.TB, h *handlerstest.Harness) []string {
	t.Helper()
	h.Declare("g", events.GroupSpec{}, "a", "b.lan")
	claims := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "test"}).Claims()
	for _, c := range claims {
		h.MustExec(decide.BootClaim{Claim: c})
	}
	h.MustExec(decide.MarkReady{Claim: claims[0], Node: "a"})
	h.MustExec(decide.FailClaim{Claim: claims[1], Reason: "StartupJobFailed", Message: "exit 1"})
	return claims
}

func waitFor(t testing.TB, r *receiver, st *eventlog.Store, s sinks.Sink) {
	t.Helper()
	// Every write has landed when this is called: read the log once.
	w := want(t, st, s)
	eventstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if got := r.got(); len(got) < len(w) {
			return fmt.Errorf("received %d of %d events", len(got), len(w))
		}
		return nil
	})
}

func checkOnceInOrder(t testing.TB, r *receiver, st *eventlog.Store, s sinks.Sink) {
	t.Helper()
	got, w := r.got(), want(t, st, s)
	if !slices.Equal(got, w) {
		t.Fatalf("received %d events %v\nwant %d, once each, in log order: %v", len(got), got, len(w), w)
	}
}

// A webhook that fails three times and then recovers receives every event
// once, in log order.
func TestWebhookFailingThreeTimesThenRecoveringGetsEveryEventOnceInOrder(t *testing.T) {
	h := handlerstest.New(t)
	rcv, srv := newReceiver(t)
	rcv.failNext = 3
	cfg := sinkConfig(t, `
sinks:
  - name: all
    url: `+srv.URL+`
    start: all
    backoff: {initial: 1ms, max: 4ms}
`)
	m := newCounts()
	start(t, h, cfg, clock.RealClock{}, m)
	lifecycle(t, h)
	waitFor(t, rcv, h.Store, cfg.Sinks[0])
	checkOnceInOrder(t, rcv, h.Store, cfg.Sinks[0])
	first := want(t, h.Store, cfg.Sinks[0])[0]
	if n := rcv.triesOf(first); n != 4 {
		t.Fatalf("the first event was tried %d times, want 3 failures + 1", n)
	}
	if got := m.get(m.failed, "all"); got != 3 {
		t.Fatalf("%d failures counted, want 3", got)
	}
	if rcv.binary == 0 {
		t.Fatal("binary mode by default: want ce-* headers")
	}
	if dl, err := sinks.ReadDeadLetters(context.Background(), h.Store.JetStream(), h.Store, ""); err != nil || len(dl) != 0 {
		t.Fatalf("dead letters %v, %v; want none", dl, err)
	}
}

// A type filter: only the alerting types reach the webhook, in order.
func TestWebhookReceivesOnlyItsTypes(t *testing.T) {
	h := handlerstest.New(t)
	rcv, srv := newReceiver(t)
	cfg := sinkConfig(t, `
sinks:
  - name: alerts
    url: `+srv.URL+`
    types: [ClaimFailed, dev.claimstream.ClaimReady.v1]
    groups: [g]
    mode: structured
    start: all
    backoff: {initial: 1ms, max: 2ms}
`)
	start(t, h, cfg, clock.RealClock{}, nil)
	lifecycle(t, h)
	waitFor(t, rcv, h.Store, cfg.Sinks[0])
	checkOnceInOrder(t, rcv, h.Store, cfg.Sinks[0])
	if n := len(rcv.got()); n != 2 {
		t.Fatalf("received %d events, want the ClaimReady and the ClaimFailed", n)
	}
	if rcv.binary != 0 {
		t.Fatal("structured mode sent ce-* headers")
	}
}

// The dispatcher stops while the webhook is failing an event, the server
// restarts, the dispatcher resumes from its durable consumer: nothing is
// lost and nothing the webhook accepted comes twice.
func TestRestartInTheMiddleLosesAndDuplicatesNothing(t *testing.T) {
	h := handlerstest.New(t)
	rcv, srv := newReceiver(t)
	cfg := sinkConfig(t, `
sinks:
  - name: all
    url: `+srv.URL+`
    start: all
    maxAttempts: 1000
    backoff: {initial: 1ms, max: 2ms}
`)
	s := cfg.Sinks[0]
	run := start(t, h, cfg, clock.RealClock{}, nil)
	h.Declare("g", events.GroupSpec{}, "a", "b", "c")
	claims := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 3, RequestedBy: "test"}).Claims()
	for _, c := range claims {
		h.MustExec(decide.BootClaim{Claim: c})
	}
	waitFor(t, rcv, h.Store, s)

	// The webhook goes down; the next event is being retried.
	rcv.mu.Lock()
	rcv.failAll = true
	rcv.mu.Unlock()
	res := h.MustExec(decide.MarkReady{Claim: claims[0], Node: "a"})
	eventstest.CheckFor(t, 30*time.Second, 2*time.Millisecond, func() error {
		if rcv.triesOf(res.Events[0].ID) < 2 {
			return fmt.Errorf("the ready event was not retried yet")
		}
		return nil
	})
	run.stop()
	h.Restart()
	rcv.mu.Lock()
	rcv.failAll = false
	rcv.mu.Unlock()

	// More events while the dispatcher is down, then it comes back.
	h.MustExec(decide.MarkReady{Claim: claims[1], Node: "b"})
	start(t, h, cfg, clock.RealClock{}, nil)
	h.MustExec(decide.FailClaim{Claim: claims[2], Reason: "StartupJobFailed"})
	waitFor(t, rcv, h.Store, s)
	checkOnceInOrder(t, rcv, h.Store, s)

	// A second restart with a healthy webhook: nothing comes again.
	before := len(rcv.got())
	h.Restart()
	start(t, h, cfg, clock.RealClock{}, nil)
	h.MustExec(decide.CompleteClaim{Claim: claims[0]})
	waitFor(t, rcv, h.Store, s)
	checkOnceInOrder(t, rcv, h.Store, s)
	if len(rcv.got()) != before+1 {
		t.Fatalf("received %d events after the restart, want 1", len(rcv.got())-before)
	}
}

// An event the webhook always refuses is tried MaxAttempts times with the
// backoff on the clock, recorded on the dead-letter stream, counted, and the
// sink goes on to the next event.
func TestEventPastMaxAttemptsIsDeadLetteredAndTheSinkGoesOn(t *testing.T) {
	h := handlerstest.New(t)
	rcv, srv := newReceiver(t)
	rcv.failType = string(events.TypeClaimBooting)
	cfg := sinkConfig(t, `
sinks:
  - name: dl
    url: `+srv.URL+`
    types: [ClaimCreated, ClaimBooting, ClaimReady]
    start: all
    maxAttempts: 3
    backoff: {initial: 1m, max: 2m}
`)
	s := cfg.Sinks[0]
	clk := clocktesting.NewFakeClock(handlerstest.Start)
	m := newCounts()
	start(t, h, cfg, clk, m)
	h.Declare("g", events.GroupSpec{}, "a")
	claim := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"}).Claims()[0]
	boot := h.MustExec(decide.BootClaim{Claim: claim}).Events[0]
	ready := h.MustExec(decide.MarkReady{Claim: claim, Node: "a"}).Events[0]

	// Waits of 1m then 2m between the three attempts: step the fake clock
	// whenever the sink waits on it.
	eventstest.CheckFor(t, 30*time.Second, 2*time.Millisecond, func() error {
		if clk.HasWaiters() {
			clk.Step(2 * time.Minute)
		}
		if got := rcv.got(); !slices.Contains(got, ready.ID) {
			return fmt.Errorf("received %d events, not yet the ready one", len(got))
		}
		return nil
	})
	if n := rcv.triesOf(boot.ID); n != 3 {
		t.Fatalf("the refused event was tried %d times, want 3", n)
	}
	got := rcv.got()
	if len(got) != 2 || got[1] != ready.ID {
		t.Fatalf("accepted %v; want the created and the ready event", got)
	}
	dl, err := sinks.ReadDeadLetters(context.Background(), h.Store.JetStream(), h.Store, "dl")
	if err != nil {
		t.Fatal(err)
	}
	if len(dl) != 1 {
		t.Fatalf("dead letters %+v, want one", dl)
	}
	r := dl[0]
	if r.Sink != "dl" || r.EventID != boot.ID || r.Seq != boot.Seq || r.Type != "ClaimBooting" || r.Attempts != 3 ||
		r.Subject != boot.Data.Reference().Claim || !strings.Contains(r.LastError, "503") || strings.HasSuffix(r.LastError, "\n") || r.Time.IsZero() {
		t.Fatalf("dead letter %+v", r)
	}
	// The sink counts a delivery once the receiver's answer is back: a
	// moment after the receiver has the event.
	eventstest.CheckFor(t, 10*time.Second, 2*time.Millisecond, func() error {
		failed, deadLettered, delivered := m.get(m.failed, "dl"), m.get(m.deadLett, "dl"), m.get(m.delivered, "dl")
		if deadLettered != 1 || failed != 3 || delivered != 2 {
			return fmt.Errorf("counted failed %d, dead-lettered %d, delivered %d; want 3, 1, 2", failed, deadLettered, delivered)
		}
		return nil
	})
	_ = s
}

// The traceparent of an event rides to the webhook as the W3C header too.
func TestWebhookGetsTheEventsTraceParent(t *testing.T) {
	h := handlerstest.New(t)
	rcv, srv := newReceiver(t)
	cfg := sinkConfig(t, "sinks: [{name: t, url: '"+srv.URL+"', start: all, types: [ClaimCreated]}]")
	h.Service.TraceParent = func(context.Context) string { return "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }
	start(t, h, cfg, clock.RealClock{}, nil)
	h.Declare("g", events.GroupSpec{}, "a")
	ev := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"}).Events[0]
	waitFor(t, rcv, h.Store, cfg.Sinks[0])
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if tp := rcv.trace[ev.ID]; tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("traceparent header %q", tp)
	}
}

// Both content modes carry CloudEvents that sdk-go validates (the
// receiver checks), with a sequence extension that sorts as the log does
// (20 digits: "10" after "9") and, in binary mode, every attribute as a
// lower-case ce- header the HTTP binding reads back.
func TestWebhookCloudEventsFollowTheBinding(t *testing.T) {
	for _, mode := range []string{"binary", "structured"} {
		t.Run(mode, func(t *testing.T) {
			h := handlerstest.New(t)
			rcv, srv := newReceiver(t)
			cfg := sinkConfig(t, "sinks: [{name: t, url: '"+srv.URL+"', mode: "+mode+", start: all}]")
			h.Service.TraceParent = func(context.Context) string { return "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }
			start(t, h, cfg, clock.RealClock{}, nil)
			h.Declare("g", events.GroupSpec{MaxSize: 4}, "a", "b", "c", "d")
			h.MustExec(decide.IncreaseSize{Group: "g", Delta: 4, RequestedBy: "test"})
			waitFor(t, rcv, h.Store, cfg.Sinks[0])
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			var prev string
			for i, id := range rcv.accepted {
				s := rcv.seq[id]
				n, err := events.ParseSequence(s)
				if len(s) != events.SequenceDigits || err != nil || n != uint64(i+1) {
					t.Fatalf("event %d: sequence %q (%d, %v), want %d zero-padded to %d digits", i+1, s, n, err, i+1, events.SequenceDigits)
				}
				if s <= prev {
					t.Fatalf("sequence %q sorts before %q", s, prev)
				}
				prev = s
				hd := rcv.ce[id]
				if mode == "structured" {
					if ct := hd.Get("Content-Type"); !strings.HasPrefix(ct, "application/cloudevents+json") {
						t.Fatalf("structured mode content-type %q", ct)
					}
					continue
				}
				for k := range hd {
					name, ok := strings.CutPrefix(strings.ToLower(k), "ce-")
					if ok && !validAttributeName(name) {
						t.Fatalf("header %s: not a CloudEvents attribute name", k)
					}
				}
				if hd.Get("ce-sequence") != s {
					t.Fatalf("ce-sequence %q, want %q", hd.Get("ce-sequence"), s)
				}
			}
			if len(rcv.accepted) < 10 {
				t.Fatalf("only %d events: the test needs sequences past 9", len(rcv.accepted))
			}
		})
	}
}

// validAttributeName is the CloudEvents rule: lower-case letters and digits.
func validAttributeName(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// A run that died holding an event unacked (a crash mid-delivery) does not
// hold the sink until the event's AckWait passes: the next run starts again
// right after the ack floor.
func TestCrashMidDeliveryResumesAtOnce(t *testing.T) {
	h := handlerstest.New(t)
	rcv, srv := newReceiver(t)
	cfg := sinkConfig(t, "sinks: [{name: c, url: '"+srv.URL+"', start: all, types: [ClaimCreated, ClaimBooting]}]")
	s := cfg.Sinks[0]
	run := start(t, h, cfg, clock.RealClock{}, nil)
	h.Declare("g", events.GroupSpec{}, "a")
	claim := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"}).Claims()[0]
	waitFor(t, rcv, h.Store, s)
	run.stop()

	// The crashed run: it took the next event and never acked it.
	h.MustExec(decide.BootClaim{Claim: claim})
	ctx := context.Background()
	cons, err := h.Store.JetStream().Consumer(ctx, h.Store.Stream(), s.ConsumerName())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Next(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	start(t, h, cfg, clock.RealClock{}, nil)
	waitFor(t, rcv, h.Store, s)
	checkOnceInOrder(t, rcv, h.Store, s)
	if took := time.Since(began); took > 15*time.Second {
		t.Fatalf("resumed after %v: waited for the AckWait", took)
	}
}
