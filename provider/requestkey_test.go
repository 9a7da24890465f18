package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// ownTrace is ctx with a traceparent of its own for call i: a distinct
// request.
func ownTrace(ctx context.Context, i int) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "traceparent", fmt.Sprintf("00-%032x-00f067aa0ba902b7-01", i+1))
}

func TestTraceIDOfTraceParent(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for tp, want := range map[string]string{
		"00-" + id + "-00f067aa0ba902b7-01":                       id,
		" 00-" + id + "-00f067aa0ba902b7-00 ":                     id,
		"01-" + id + "-00f067aa0ba902b7-01-whatever":              id, // a later version may add fields
		"00-" + id + "-00f067aa0ba902b7-01-extra":                 "", // version 00 has exactly four
		"ff-" + id + "-00f067aa0ba902b7-01":                       "", // version ff is invalid
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-" + id + "-0000000000000000-01":                       "",
		"00-" + strings.ToUpper(id) + "-00f067aa0ba902b7-01":      "",
		"00-" + id[:31] + "-00f067aa0ba902b7-01":                  "",
		"":                                                        "", "garbage": "",
	} {
		got, ok := traceIDOf(tp)
		if got != want || ok != (want != "") {
			t.Errorf("traceIDOf(%q) = %q, %t; want %q", tp, got, ok, want)
		}
	}
}

// FuzzTraceIDOf: any traceparent a caller sends is either refused or gives
// 32 lower-case hex digits, not all zero, found in the input.
func FuzzTraceIDOf(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Add("00--")
	f.Fuzz(func(t *testing.T, tp string) {
		id, ok := traceIDOf(tp)
		if !ok {
			if id != "" {
				t.Fatalf("refused with id %q", id)
			}
			return
		}
		if len(id) != 32 || !isLowerHex(id) || strings.Trim(id, "0") == "" || !strings.Contains(tp, id) {
			t.Fatalf("traceIDOf(%q) = %q", tp, id)
		}
	})
}

// A retried IncreaseSize (its answer lost, or outcome unknown) is
// recognised by the trace of its call, or, without one, by caller, group
// and delta within events.RequestRepeatWindow: it succeeds and creates no
// second claim. A new trace, or the same call after the window, is a new
// request.
func TestARetriedIncreaseSizeCreatesNoSecondClaim(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed("w-0", "w-1", "w-2", "w-3", "w-4")...)
	target := func() int {
		var n int
		e.h.Read(func(st *projections.State) { n = st.TargetSize("workers") })
		return n
	}
	call := func(traceparent string) {
		t.Helper()
		ctx := e.ctx()
		if traceparent != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", traceparent)
		}
		if _, err := e.c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1}); err != nil {
			t.Fatal(err)
		}
	}
	const tp1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	call(tp1)
	call(tp1)
	if n := target(); n != 1 {
		t.Fatalf("target size %d after a call and its retry (same trace), want 1", n)
	}
	call("00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if n := target(); n != 2 {
		t.Fatalf("target size %d after a call of another trace, want 2", n)
	}
	// No trace: the caller, group and delta within the window.
	call("")
	e.h.Clock.Step(events.RequestRepeatWindow - time.Second)
	call("")
	if n := target(); n != 3 {
		t.Fatalf("target size %d after a traceless call and its retry, want 3", n)
	}
	e.h.Clock.Step(2 * time.Second)
	call("")
	if n := target(); n != 4 {
		t.Fatalf("target size %d after the same call past the window, want 4", n)
	}
	// The request key is in the log, on the claims and the group's call.
	var keys []string
	e.h.Read(func(st *projections.State) {
		for _, c := range st.LiveClaims("workers") {
			keys = append(keys, c.Request.Key)
		}
	})
	if len(keys) != 4 || keys[0] != "trace 4bf92f3577b34da6a3ce929d0e0e4736 workers +1" || keys[2] != "caller "+DefaultRequestedBy+" workers +1" {
		t.Fatalf("claims' request keys %q", keys)
	}
}

// An append whose outcome is unknown is answered Unknown, never a code
// that says nothing happened.
func TestAnUnknownOutcomeIsNotARefusal(t *testing.T) {
	err := toStatus("NodeGroupIncreaseSize", "workers", &events.OutcomeUnknownError{Aggregates: "slot/w-0", Lost: errors.New("quorum lost"), Why: "no answer"})
	if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("status %v", err)
	}
}
