// Package telemetry sets up OpenTelemetry for serve: traces (the gRPC
// provider through otelgrpc, a span per command and per append, the trace
// context riding in each event's traceparent so one trace runs from
// IncreaseSize to ClaimReady), metrics through the OTel SDK with a
// Prometheus scrape handler, and OTLP export when an endpoint is given.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/internal/buildinfo"
)

// ScopeName is the instrumentation scope of claimstream's own spans and
// instruments.
const ScopeName = "github.com/claimstream/claimstream"

// Options configure Setup.
type Options struct {
	// ServiceName is the resource's service.name (default "claimstream").
	ServiceName string
	// ServiceVersion is the resource's service.version (default: the
	// build's version, as Build).
	ServiceVersion string
	// Build is the build claimstream_build_info reports (default
	// buildinfo.Get()); its version is ServiceVersion's.
	Build buildinfo.Info
	// OTLPEndpoint, when set, exports traces and metrics over OTLP/gRPC:
	// "host:4317" (TLS), or a URL ("http://collector:4317" is plaintext,
	// "https://..." TLS). Empty: no OTLP export.
	OTLPEndpoint string
	// Prometheus serves the metrics on Telemetry.Handler.
	Prometheus bool
	// SpanExporter, when set, also receives every span, synchronously
	// (tests: tracetest.NewInMemoryExporter).
	SpanExporter sdktrace.SpanExporter
	// MetricReader, when set, also reads the metrics (tests:
	// sdkmetric.NewManualReader).
	MetricReader sdkmetric.Reader
	Logger       *slog.Logger
}

// Telemetry is the set-up providers. Shutdown flushes and stops them.
type Telemetry struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	// Tracer is claimstream's tracer (Service.Tracer).
	Tracer trace.Tracer
	// Propagator is W3C trace context.
	Propagator propagation.TextMapPropagator
	// Metrics are claimstream's instruments.
	Metrics *Metrics

	handler          http.Handler
	providerRequests *providerRequests
	shutdown         []func(context.Context) error
}

// Setup builds the providers and the instruments. It sets no globals.
func Setup(ctx context.Context, o Options) (*Telemetry, error) {
	if o.ServiceName == "" {
		o.ServiceName = "claimstream"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Build, o.ServiceVersion = buildOf(o.Build, o.ServiceVersion)
	attrs := []attribute.KeyValue{attribute.String("service.name", o.ServiceName), attribute.String("service.version", o.ServiceVersion)}
	attrs = append(attrs, k8sAttributes(os.Getenv)...)
	// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (WithFromEnv, last)
	// win over the above.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	t := &Telemetry{Propagator: propagation.TraceContext{}}
	fail := func(err error) (*Telemetry, error) {
		_ = t.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}

	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if o.SpanExporter != nil {
		topts = append(topts, sdktrace.WithSyncer(o.SpanExporter))
	}
	var gather promclient.Gatherer
	// The OTLP reader runs before t.Metrics exists; it reads it from here.
	var metricsOf atomic.Pointer[Metrics]
	var mopts []sdkmetric.Option
	mopts = append(mopts, sdkmetric.WithResource(res))
	if o.MetricReader != nil {
		mopts = append(mopts, sdkmetric.WithReader(o.MetricReader))
	}
	if o.OTLPEndpoint != "" {
		te, err := otlptracegrpc.New(ctx, traceEndpoint(o.OTLPEndpoint)...)
		if err != nil {
			return fail(fmt.Errorf("otlp trace exporter %s: %w", o.OTLPEndpoint, err))
		}
		topts = append(topts, sdktrace.WithBatcher(te))
		me, err := otlpmetricgrpc.New(ctx, metricEndpoint(o.OTLPEndpoint)...)
		if err != nil {
			_ = te.Shutdown(ctx)
			return fail(fmt.Errorf("otlp metric exporter %s: %w", o.OTLPEndpoint, err))
		}
		follows := func() bool { m := metricsOf.Load(); return m != nil && m.follows() }
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(leaderOnlyExporter{Exporter: me, follows: follows})))
		o.Logger.Info("exporting telemetry over OTLP", "endpoint", o.OTLPEndpoint)
	}
	if o.Prometheus {
		reg := promclient.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		pe, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			return fail(fmt.Errorf("prometheus exporter: %w", err))
		}
		mopts = append(mopts, sdkmetric.WithReader(pe))
		gather = reg
	}
	t.TracerProvider = sdktrace.NewTracerProvider(topts...)
	t.shutdown = append(t.shutdown, t.TracerProvider.Shutdown)
	t.MeterProvider = sdkmetric.NewMeterProvider(mopts...)
	t.shutdown = append(t.shutdown, t.MeterProvider.Shutdown)
	t.Tracer = t.TracerProvider.Tracer(ScopeName)
	t.Metrics, err = NewMetrics(t.MeterProvider.Meter(ScopeName))
	if err != nil {
		return fail(err)
	}
	metricsOf.Store(t.Metrics)
	if err := registerBuildInfo(t.MeterProvider.Meter(ScopeName), o.Build); err != nil {
		return fail(err)
	}
	t.providerRequests, err = newProviderRequests(t.MeterProvider.Meter(ScopeName), otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.TracerProvider),
		otelgrpc.WithMeterProvider(t.MeterProvider),
		otelgrpc.WithPropagators(t.Propagator),
	))
	if err != nil {
		return fail(err)
	}
	if gather != nil {
		t.handler = scrapeHandler(gather, t.Metrics, o.Logger)
	}
	return t, nil
}

func traceEndpoint(ep string) []otlptracegrpc.Option {
	if strings.Contains(ep, "://") {
		return []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(ep)}
	}
	return []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(ep)}
}

func metricEndpoint(ep string) []otlpmetricgrpc.Option {
	if strings.Contains(ep, "://") {
		return []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpointURL(ep)}
	}
	return []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(ep)}
}

type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn("prometheus scrape", "err", fmt.Sprint(v...)) }

// Handler serves the Prometheus scrape (mount it on /metrics). Without
// Options.Prometheus it answers 404.
func (t *Telemetry) Handler() http.Handler {
	if t.handler == nil {
		return http.NotFoundHandler()
	}
	return t.handler
}

// GRPCServerOption traces and measures the gRPC provider (otelgrpc) and
// counts its calls (claimstream_provider_requests_total): pass it to
// provider.NewGRPCServer's extra options.
func (t *Telemetry) GRPCServerOption() grpc.ServerOption {
	return grpc.StatsHandler(t.providerRequests)
}

// InstrumentService traces svc's commands and appends, stamps the W3C
// traceparent on every event it writes, and measures its appends.
func (t *Telemetry) InstrumentService(svc *handlers.Service) {
	svc.Tracer = t.Tracer
	svc.TraceParent = handlers.TraceParentOf
	svc.OnAppend = t.Metrics.OnAppend
}

// Shutdown flushes the exporters and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		if err := t.shutdown[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	t.shutdown = nil
	return errors.Join(errs...)
}
