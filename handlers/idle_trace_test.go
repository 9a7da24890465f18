package handlers_test

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
)

// The built-in scaler ticks (and the slots' passes run) every few seconds;
// with nothing to do they write nothing and make no span, over an hour of
// fake time. A pass that writes still makes its span.
func TestIdleTicksMakeNoSpans(t *testing.T) {
	e := newRenv(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	e.h.Service.Tracer = tp.Tracer("test")
	spec := events.GroupSpec{Scaler: events.ScalerBuiltin, Builtin: &events.BuiltinScaler{PodsPerNode: 1, MaxNodes: 2, Hold: events.Duration(time.Minute)}}
	e.declare("b", spec, false, "b1", "b2")
	e.passes()
	before := len(rec.Ended())
	seq := e.h.Views.Seq()
	for elapsed := time.Duration(0); elapsed < time.Hour; elapsed += 15 * time.Second {
		e.step(15 * time.Second)
		e.pass()
	}
	if e.h.Views.Seq() != seq {
		t.Fatalf("the idle hour wrote events (seq %d -> %d): not idle", seq, e.h.Views.Seq())
	}
	if n := len(rec.Ended()) - before; n != 0 {
		var names []string
		for _, s := range rec.Ended()[before:] {
			names = append(names, s.Name())
		}
		t.Fatalf("an idle hour made %d spans: %v", n, names[:min(len(names), 10)])
	}

	// A command that writes makes its span, dated from its start.
	e.h.MustExec(decide.IncreaseSize{Group: "b", Delta: 1, RequestedBy: "test"})
	var cmd sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "claimstream.command IncreaseSize" {
			cmd = s
		}
	}
	if cmd == nil {
		t.Fatal("no span for a command that wrote")
	}
	// A refusal makes its span too, with the error.
	if _, err := e.h.Exec(decide.IncreaseSize{Group: "nope", Delta: 1, RequestedBy: "test"}); err == nil {
		t.Fatal("IncreaseSize of an unknown group was not refused")
	}
	last := rec.Ended()[len(rec.Ended())-1]
	if last.Name() != "claimstream.command IncreaseSize" || last.Status().Code.String() != "Error" {
		t.Fatalf("the refusal's span: %s %v", last.Name(), last.Status())
	}
}
