package provider

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

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

// A retried IncreaseSize (its answer lost, or outcome unknown) creates no
// second claim. With a traceparent it is recognised by its trace; without
// one, by caller, group and delta when the call before it ended without a
// success its caller saw, within events.RequestRepeatWindow. A new trace,
// a call after a success, or a retry past the window is a new request.
func TestARetriedIncreaseSizeCreatesNoSecondClaim(t *testing.T) {
	e := newEnv(t, Options{})
	declare(t, e.h, "workers", events.GroupSpec{}, slotsNamed("w-0", "w-1", "w-2", "w-3", "w-4", "w-5")...)
	target := func() int {
		var n int
		e.h.Read(func(st *projections.State) { n = st.TargetSize("workers") })
		return n
	}
	call := func(ctx context.Context, traceparent string) error {
		t.Helper()
		if traceparent != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", traceparent)
		}
		_, err := e.c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1})
		return err
	}
	mustCall := func(traceparent string) {
		t.Helper()
		if err := call(e.ctx(), traceparent); err != nil {
			t.Fatal(err)
		}
	}
	// lostCall makes the next append land and holds its answer until both
	// the caller and the server have seen the call's deadline pass, as
	// when the log's answer is lost.
	var lose atomic.Pointer[chan struct{}]
	e.h.Service.OnAppend = func(ctx context.Context, _ time.Duration, _ int, err error) {
		if err != nil {
			return
		}
		if callerGaveUp := lose.Swap(nil); callerGaveUp != nil {
			<-ctx.Done()
			<-*callerGaveUp
		}
	}
	lostCall := func(traceparent string) {
		t.Helper()
		callerGaveUp := make(chan struct{})
		lose.Store(&callerGaveUp)
		defer close(callerGaveUp)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := call(ctx, traceparent); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("call whose answer is lost: %v", err)
		}
	}
	const tp1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	lostCall(tp1)
	mustCall(tp1)
	if n := target(); n != 1 {
		t.Fatalf("target size %d after a call and its retry (same trace), want 1", n)
	}
	mustCall("00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if n := target(); n != 2 {
		t.Fatalf("target size %d after a call of another trace, want 2", n)
	}
	// No trace: a retry after a lost answer, within the window.
	lostCall("")
	e.h.Clock.Step(events.RequestRepeatWindow - time.Second)
	mustCall("")
	if n := target(); n != 3 {
		t.Fatalf("target size %d after a traceless call and its retry, want 3", n)
	}
	// The same call after a success is a new request.
	mustCall("")
	if n := target(); n != 4 {
		t.Fatalf("target size %d after the same call after a success, want 4", n)
	}
	// A retry past the window is a new request.
	lostCall("")
	e.h.Clock.Step(events.RequestRepeatWindow)
	mustCall("")
	if n := target(); n != 6 {
		t.Fatalf("target size %d after a retry past the window, want 6", n)
	}
	// The request key is in the log, on the claims.
	var keys []string
	e.h.Read(func(st *projections.State) {
		for _, c := range st.LiveClaims("workers") {
			keys = append(keys, c.Request.Key)
		}
	})
	if len(keys) != 6 || keys[0] != "trace 4bf92f3577b34da6a3ce929d0e0e4736 workers +1" || !strings.HasPrefix(keys[2], "caller "+DefaultRequestedBy+" workers +1 #") || keys[2] == keys[3] {
		t.Fatalf("claims' request keys %q", keys)
	}
}

// An append whose outcome is unknown is answered Unknown, never a code
// that says nothing happened.
func TestAnUnknownOutcomeIsNotARefusal(t *testing.T) {
	err := toStatus("NodeGroupIncreaseSize", "workers", &eventlog.OutcomeUnknownError{Aggregates: "slot/w-0", Lost: errors.New("quorum lost"), Why: "no answer"})
	if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("status %v", err)
	}
}
