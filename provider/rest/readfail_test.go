package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
)

// apiOverAStoppableLog serves the API (no auth) over a log of n slot
// declarations on an embedded server the test may stop: every read of
// the log then fails.
func apiOverAStoppableLog(t *testing.T, n int) (*httptest.Server, *eventstest.Server, *eventlog.Store) {
	t.Helper()
	srv := eventstest.StartServer(t)
	st := srv.Store()
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		if _, err := st.Append(context.Background(), events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}}}); err != nil {
			t.Fatal(err)
		}
	}
	views := projections.NewRunner(st, projections.RunnerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	api := rest.New(views, handlers.NewService(st, views, clk, "/test", nil), st, clk, rest.Options{NoAuth: true})
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	return hs, srv, st
}

// TestReadsOfAnUnreadableLogAnswerAnError: with the store gone, every read
// of the log is an error status with a JSON error body, never a 200 with
// an empty body.
func TestReadsOfAnUnreadableLogAnswerAnError(t *testing.T) {
	hs, srv, _ := apiOverAStoppableLog(t, 5)
	srv.Stop()
	for _, path := range []string{
		"/api/v1/events", "/api/v1/events?last=2", "/api/v1/events?slot=s1", "/api/v1/events?type=SlotDeclared",
		"/api/v1/events/export", "/api/v1/events?follow=true", "/api/v1/events/stream?last=3", "/api/v1/events/stream",
		"/api/v1/replay?seq=2", "/api/v1/replay?at=2026-03-04T09:00:00Z", "/api/v1/audit/slots/s1", "/api/v1/audit/claims/s1-abcdef",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		var body rest.ErrorBody
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &body) != nil || body.Code != "Unavailable" || !strings.Contains(body.Error, "cannot read the log") {
			t.Errorf("%s over a stopped store: %d %q", path, resp.StatusCode, b)
		}
	}
}

// TestAFollowedStreamWhoseLogFailsIsCut: a read that fails after the
// answer started ends it with an error line (an error event) and a cut
// connection, so the client cannot take it for a whole answer.
func TestAFollowedStreamWhoseLogFailsIsCut(t *testing.T) {
	for _, tc := range []struct {
		path     string
		lastLine func(string) bool
		events   int
	}{
		{"/api/v1/events?follow=true", func(l string) bool { return strings.HasPrefix(l, `{"error":"cannot read the log`) }, 5},
		{"/api/v1/events/stream?from=1", func(l string) bool { return l == "event: log-error" }, 5},
	} {
		t.Run(tc.path, func(t *testing.T) {
			hs, srv, st := apiOverAStoppableLog(t, 5)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			seen := 0
			read := func(n int) {
				for seen < n {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("after %d events: %v", seen, err)
					}
					if strings.Contains(line, `"sequence"`) || strings.HasPrefix(line, "data: ") {
						seen++
					}
				}
			}
			read(tc.events)
			// One more, appended now: the stream follows the log.
			if _, err := st.Append(ctx, events.SlotAggregate("late"), 0, events.Event{Time: time.Now(), Data: events.SlotDeclared{Ref: events.Ref{Slot: "late", Group: "g", Cause: "test"}}}); err != nil {
				t.Fatal(err)
			}
			read(tc.events + 1)
			// The log goes away under the running read.
			js, err := jetstream.New(srv.Conn)
			if err != nil {
				t.Fatal(err)
			}
			if err := js.DeleteStream(ctx, "CLAIMSTREAM"); err != nil {
				t.Fatal(err)
			}
			var rest []string
			var end error
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					end = err
					break
				}
				if l := strings.TrimSpace(line); l != "" {
					rest = append(rest, l)
				}
			}
			if len(rest) == 0 || !tc.lastLine(rest[0]) {
				t.Errorf("after the store stopped: %q, want an error first", rest)
			}
			if !errors.Is(end, io.ErrUnexpectedEOF) {
				t.Errorf("the answer ended with %v, want a cut (unexpected EOF)", end)
			}
		})
	}
}

// TestTheClientReportsACutListing: the CLI's client turns the error line
// of a followed listing whose log went away into an error, not a quiet
// end.
func TestTheClientReportsACutListing(t *testing.T) {
	hs, srv, st := apiOverAStoppableLog(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = (&rest.Client{BaseURL: hs.URL}).Events(ctx, rest.EventQuery{Follow: true}, func(rest.Event) error {
		switch seen++; seen {
		case 3:
			// The listing is whole; one more, appended now, comes
			// through the follow.
			_, err := st.Append(ctx, events.SlotAggregate("late"), 0, events.Event{Time: time.Now(), Data: events.SlotDeclared{Ref: events.Ref{Slot: "late", Group: "g", Cause: "test"}}})
			return err
		case 4:
			return js.DeleteStream(ctx, "CLAIMSTREAM")
		}
		return nil
	})
	if seen != 4 || err == nil || !strings.Contains(err.Error(), "cannot read the log") || !strings.Contains(err.Error(), "the answer is cut there") {
		t.Fatalf("after %d events: %v, want the server's error", seen, err)
	}
}
