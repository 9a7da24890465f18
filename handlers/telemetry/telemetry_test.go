package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func setup(t testing.TB, o telemetry.Options) *telemetry.Telemetry {
	t.Helper()
	o.Logger = quiet
	tel, err := telemetry.Setup(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

func traceOf(t testing.TB, tp string) trace.TraceID {
	t.Helper()
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		t.Fatalf("traceparent %q is not a valid W3C trace context", tp)
	}
	return sc.TraceID()
}

// One claim, one trace: cluster-autoscaler's NodeGroupIncreaseSize comes in
// over gRPC (otelgrpc starts the server span), the boot and the readiness
// gate run later from a background ctx as the reactors do, across a
// restart of the server. Every span of the claim is in the trace the gRPC
// call started, and so are the traceparents of its events in the log.
func TestOneTraceFromIncreaseSizeToClaimReady(t *testing.T) {
	h := handlerstest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tel := setup(t, telemetry.Options{SpanExporter: exp})
	tel.InstrumentService(h.Service)
	h.Declare("g", events.GroupSpec{}, "a", "b")

	conn := serveProvider(t, h, tel)
	if _, err := pb.NewCloudProviderClient(conn).NodeGroupIncreaseSize(context.Background(), &pb.NodeGroupIncreaseSizeRequest{Id: "g", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	var claim string
	h.Read(func(s *projections.State) {
		for name := range s.Claims {
			claim = name
		}
	})
	if claim == "" {
		t.Fatal("no claim")
	}
	// The server span ends once the handler has returned, which may be
	// after the client has its answer.
	var root sdktrace.ReadOnlySpan
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		for _, s := range exp.GetSpans().Snapshots() {
			if s.SpanKind() == trace.SpanKindServer && strings.Contains(s.Name(), "NodeGroupIncreaseSize") {
				root = s
				return nil
			}
		}
		return fmt.Errorf("no otelgrpc server span among %v", names(exp.GetSpans()))
	})
	traceID := root.SpanContext().TraceID()

	// The reactors: a background ctx, no span of their own.
	h.MustExec(decide.BootClaim{Claim: claim})
	h.Restart()
	tel.InstrumentService(h.Service)
	h.Clock.Step(3 * time.Minute)
	h.MustExec(decide.MarkReady{Claim: claim, Node: "a"})

	spans := exp.GetSpans()
	want := map[string]int{
		"claimstream.command IncreaseSize": 1, "claimstream.command BootClaim": 1, "claimstream.command MarkReady": 1,
		"claimstream.append": 3,
	}
	got := map[string]int{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("span %q is in trace %s, want %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
		got[s.Name]++
	}
	for n, c := range want {
		if got[n] != c {
			t.Errorf("%d spans %q, want %d (all: %v)", got[n], n, c, names(spans))
		}
	}
	// The command spans of the reactors are children of a span of the
	// trace, not roots.
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "claimstream.command") && !s.Parent.IsValid() {
			t.Errorf("span %q has no parent", s.Name)
		}
	}

	// The log: every event of the claim carries a traceparent of the trace.
	seen := map[events.Type]bool{}
	err := h.Store.Read(context.Background(), 1, 0, func(e events.Event) error {
		if e.Data == nil || e.Data.Reference().Claim != claim {
			return nil
		}
		seen[e.Type] = true
		if e.TraceParent == "" {
			t.Errorf("%s has no traceparent", e.Type)
			return nil
		}
		if id := traceOf(t, e.TraceParent); id != traceID {
			t.Errorf("%s is in trace %s, want %s", e.Type, id, traceID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ty := range []events.Type{events.TypeClaimCreated, events.TypeClaimBooting, events.TypeClaimReady} {
		if !seen[ty] {
			t.Errorf("no %s in the log", ty)
		}
	}
	h.Read(func(s *projections.State) {
		if c := s.Claims[claim]; c == nil || traceOf(t, c.TraceParent) != traceID {
			t.Errorf("the claim's view does not keep its traceparent: %+v", c)
		}
	})
}

// A command called with a span of its own stays in that trace, even about a
// claim created in another.
func TestCallersSpanWins(t *testing.T) {
	h := handlerstest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tel := setup(t, telemetry.Options{SpanExporter: exp})
	tel.InstrumentService(h.Service)
	h.Declare("g", events.GroupSpec{}, "a")
	claim := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"}).Claims()[0]
	ctx, op := tel.Tracer.Start(context.Background(), "operator")
	res, err := h.Service.Execute(ctx, decide.FailClaim{Claim: claim, Reason: "DeletedByHand"})
	op.End()
	if err != nil {
		t.Fatal(err)
	}
	if id := traceOf(t, res.Events[0].TraceParent); id != op.SpanContext().TraceID() {
		t.Fatalf("the event is in trace %s, want the caller's %s", id, op.SpanContext().TraceID())
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// The instruments, read through the Prometheus scrape handler.
func TestMetricsOnTheScrapeEndpoint(t *testing.T) {
	h := handlerstest.New(t)
	tel := setup(t, telemetry.Options{Prometheus: true})
	tel.InstrumentService(h.Service)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// serve's views: the metrics hook on the runner.
	views := projections.NewRunner(h.Store, projections.RunnerOptions{OnEvent: tel.Metrics.OnEvent, Logger: quiet})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- views.Run(ctx) }()
	defer func() { cancel(); <-done }()
	tel.Metrics.ObserveViews(views)
	wait := func(res handlers.Result) {
		t.Helper()
		if err := views.WaitFor(ctx, res.Last); err != nil {
			t.Fatal(err)
		}
	}

	h.Declare("g", events.GroupSpec{}, "a", "b", "c")
	claims := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 3, RequestedBy: "test"}).Claims()
	for _, c := range claims[:2] {
		h.MustExec(decide.BootClaim{Claim: c})
	}
	h.Clock.Step(3 * time.Minute)
	h.MustExec(decide.MarkReady{Claim: claims[0], Node: "a"})
	h.Clock.Step(15 * time.Minute)
	h.MustExec(decide.ExpireDeadline{Claim: claims[1]})
	wait(h.MustExec(decide.FireShutdown{Claim: claims[1], Force: true}))
	tel.Metrics.DeliveryFailed("alerts")
	tel.Metrics.DeliveryFailed("alerts")
	tel.Metrics.DeadLettered("alerts")
	tel.Metrics.TLSReloadFailed("api")

	// The views' OnEvent hook counts an event right after its fold: a
	// waiter released by the fold may scrape a moment before it.
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(scrape(t, tel), `claimstream_shutdown_attempts_total{force="true",group="g"} 1`+"\n") {
			return errors.New("the shutdown is not counted yet")
		}
		return nil
	})
	body := scrape(t, tel)
	for _, line := range []string{
		`claimstream_claims{group="g",phase="pending"} 1`,
		`claimstream_claims{group="g",phase="ready"} 1`,
		`claimstream_claims{group="g",phase="booting"} 0`,
		`claimstream_claim_time_to_ready_seconds_sum{group="g"} 180`,
		`claimstream_claim_time_to_ready_seconds_count{group="g"} 1`,
		`claimstream_claim_attempts_count{group="g"} 2`,
		`claimstream_claim_attempts_bucket{group="g",le="1"} 2`,
		`claimstream_deadline_misses_total{group="g"} 1`,
		`claimstream_claim_failures_total{group="g",reason="DeadlineExceeded"} 1`,
		`claimstream_shutdown_attempts_total{force="true",group="g"} 1`,
		`claimstream_append_duration_seconds_count{outcome="ok"} 6`,
		`claimstream_projection_lag_events 0`,
		`claimstream_sink_delivery_failures_total{sink="alerts"} 2`,
		`claimstream_sink_dead_letters_total{sink="alerts"} 1`,
		`claimstream_tls_certificate_reload_failures_total{server="api"} 1`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if strings.Contains(body, `phase="failed"`) {
		t.Error("the failed claim awaiting collection is counted as a claim")
	}
	if t.Failed() {
		t.Log(body)
	}

	// Views started after the history do not count it again.
	again := projections.NewRunner(h.Store, projections.RunnerOptions{OnEvent: func(e events.Event) { t.Errorf("history counted again: %s", e.Type) }, Logger: quiet})
	if err := again.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func scrape(t testing.TB, tel *telemetry.Telemetry) string {
	t.Helper()
	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	return string(b)
}

func TestNoPrometheusAnswers404(t *testing.T) {
	tel := setup(t, telemetry.Options{})
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatal(rec.Code)
	}
}

// An OTLP endpoint is dialled lazily: Setup succeeds without a collector,
// and Shutdown gives up within its ctx.
func TestOTLPEndpointConfigured(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{OTLPEndpoint: "http://127.0.0.1:1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.Tracer.Start(context.Background(), "x")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = tel.Shutdown(ctx)
}

// cluster-autoscaler's calls are counted by method and code, every
// method at 0 before its first call; other services' calls are not.
func TestProviderRequestsCounted(t *testing.T) {
	h := handlerstest.New(t)
	tel := setup(t, telemetry.Options{Prometheus: true})
	h.Declare("g", events.GroupSpec{}, "a")
	conn := serveProvider(t, h, tel)
	body := scrape(t, tel)
	for _, m := range telemetry.ProviderMethods() {
		if line := `claimstream_provider_requests_total{code="OK",method="` + m + `"} 0`; !strings.Contains(body, line+"\n") {
			t.Errorf("before any call the scrape lacks %s", line)
		}
	}
	ctx := context.Background()
	client := pb.NewCloudProviderClient(conn)
	for range 2 {
		if _, err := client.Refresh(ctx, &pb.RefreshRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("TargetSize of an unknown group: %v", err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	// gRPC ends a call (stats.End, where it is counted) after its answer
	// is sent: the client can hold the answer first.
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		body = scrape(t, tel)
		for _, line := range []string{
			`claimstream_provider_requests_total{code="OK",method="Refresh"} 2`,
			`claimstream_provider_requests_total{code="NotFound",method="NodeGroupTargetSize"} 1`,
			`claimstream_provider_requests_total{code="OK",method="NodeGroupTargetSize"} 0`,
		} {
			if !strings.Contains(body, line+"\n") {
				return fmt.Errorf("scrape lacks %s", line)
			}
		}
		return nil
	})
	if strings.Contains(body, `claimstream_provider_requests_total{code="OK",method="Check"}`) {
		t.Error("a health check is counted as cluster-autoscaler's call")
	}
}

// serveProvider serves the provider behind telemetry's gRPC option, as
// serve wires it, until the test ends, and returns a client connection.
func serveProvider(t *testing.T, h *handlerstest.Harness, tel *telemetry.Telemetry) *grpc.ClientConn {
	t.Helper()
	srv := provider.New(h.Views, h.Service, h.Clock, provider.Options{Logger: quiet})
	gs, err := provider.NewGRPCServer(srv, nil, true, tel.GRPCServerOption())
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
