package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
)

// readyzOverAGap answers /readyz from views started over a log whose last
// event (seq 10) a truncated block file lost.
func readyzOverAGap(t *testing.T, accept bool) (int, rest.Health) {
	t.Helper()
	h := apiOverAGap(t, accept)
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httptestRequest("GET", "/readyz"))
	var body rest.Health
	if err := json.Unmarshal(rec.body.Bytes(), &body); err != nil {
		t.Fatalf("readyz body %q: %v", rec.body.String(), err)
	}
	return rec.status, body
}

// apiOverAGap is the API over views started on a log of ten slot
// declarations whose last (seq 10) a truncated block file lost.
func apiOverAGap(t *testing.T, accept bool) http.Handler {
	t.Helper()
	srv := eventstest.StartServer(t)
	st := srv.Store()
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	for i := range 10 {
		name := fmt.Sprintf("s%d", i)
		if _, err := st.Append(context.Background(), events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}}}); err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop()
	srv.TruncateBlock("CLAIMSTREAM", 100)
	srv.Start()
	st = srv.Store()
	views := projections.NewRunner(st, projections.RunnerOptions{AcceptGaps: accept})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	return rest.New(views, handlers.NewService(st, views, clk, "/test", nil), st, clk, rest.Options{NoAuth: true})
}

func TestReadyzSaysWhichSequencesAreMissing(t *testing.T) {
	status, body := readyzOverAGap(t, false)
	if status != http.StatusServiceUnavailable || body.Status != "log gaps" || !strings.Contains(body.Problem, "sequence 10 is missing from the log") || !strings.Contains(body.Problem, "writes refused") {
		t.Fatalf("readyz over a gap: %d %+v", status, body)
	}
	// Accepted gaps: ready (the lost last event is not waited for), and
	// still said.
	status, body = readyzOverAGap(t, true)
	if status != http.StatusOK || body.Status != "ready" || !strings.Contains(body.Problem, "sequence 10 is missing from the log") {
		t.Fatalf("readyz over an accepted gap: %d %+v", status, body)
	}
}

func TestEventsOfALogWithAGapAreListed(t *testing.T) {
	// The operator reads around the gap: the listing shows what is there,
	// the newest events (--last) included: of the last three sequences
	// (8-10), the two that are there.
	h := apiOverAGap(t, false)
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httptestRequest("GET", "/api/v1/events?last=3"))
	lines := strings.Split(strings.TrimSpace(rec.body.String()), "\n")
	if rec.status != http.StatusOK || len(lines) != 2 || !strings.Contains(lines[0], `"sequence":"00000000000000000008"`) || !strings.Contains(lines[1], `"sequence":"00000000000000000009"`) {
		t.Fatalf("events of a log with a gap: %d\n%s", rec.status, rec.body.String())
	}
}

func TestReplayOverAGapIsRefusedNamingIt(t *testing.T) {
	h := apiOverAGap(t, true)
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httptestRequest("GET", "/api/v1/replay?seq=10"))
	var body rest.ErrorBody
	_ = json.Unmarshal(rec.body.Bytes(), &body)
	if rec.status != http.StatusPreconditionFailed || body.Code != "FailedPrecondition" || !strings.Contains(body.Error, "sequence 10 is missing from the log") {
		t.Fatalf("replay over a gap: %d %s", rec.status, rec.body.String())
	}
	// Before the gap the replay is whole.
	rec = &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httptestRequest("GET", "/api/v1/replay?seq=9"))
	if rec.status != http.StatusOK {
		t.Fatalf("replay before the gap: %d %s", rec.status, rec.body.String())
	}
}
