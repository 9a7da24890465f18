package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
	"github.com/claimstream/claimstream/whatif"
)

const whatIfPool = `groups:
  - {name: homelab, minSize: 0, scaler: cluster-autoscaler, readinessTaints: [], cost: {pricePerHour: 1, currency: EUR}}
slots:
  - {name: node-1.lan, group: homelab, startup: {podSpec: {containers: [{name: up, image: busybox}]}}, shutdown: {podSpec: {containers: [{name: down, image: busybox}]}}}
`

// POST /api/v1/whatif: a bad request is refused with the reason, and
// without the bearer token nothing is read; a good one answers the runs
// (here a log whose one call the replay makes again), the log unchanged.
func TestWhatIfEndpoint(t *testing.T) {
	f := resttest.Start(t)
	f.H.Declare("homelab", events.GroupSpec{}, "node-1.lan")
	from := f.H.Clock.Now().UTC()
	f.Do(decide.IncreaseSize{Group: "homelab", Delta: 1, RequestedBy: "cluster-autoscaler"})
	f.H.Clock.Step(time.Hour)
	last, _ := f.H.Store.LastSeq(context.Background())

	post := func(token string, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, f.Server.URL+"/api/v1/whatif", strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := post("", `{}`); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", resp.StatusCode)
	}
	for body, want := range map[string]string{
		`{"from":"2026-03-04T10:00:00Z","to":"2026-03-04T09:00:00Z","candidates":[]}`:                                     "the period is empty",
		`{"from":"2026-03-04T09:00:00Z","to":"2026-03-04T10:00:00Z","candidates":[{"name":"x.yaml","pool":"groups: 3"}]}`: "x.yaml",
		`not json`: "request body",
		`{"from":"2000-01-01T00:00:00Z","to":"9999-12-31T00:00:00Z","candidates":[{"name":"x.yaml","pool":"groups: []"}]}`: "31 days (whatif.MaxWindow)",
	} {
		resp := post(resttest.Token, body)
		var eb rest.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		if resp.StatusCode != http.StatusBadRequest || eb.Code != "InvalidArgument" || !strings.Contains(eb.Error, want) {
			t.Errorf("%s: %d %+v, want 400 saying %q", body, resp.StatusCode, eb, want)
		}
	}
	var lines []rest.WhatIfProgress
	rep, err := f.Client.WhatIf(context.Background(), whatif.Request{From: from, To: from.Add(time.Hour), Seed: 1,
		Candidates: []whatif.RequestCandidate{{Name: "same.yaml", Pool: whatIfPool}}}, func(p rest.WhatIfProgress) { lines = append(lines, p) })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 1 || rep.Baseline.Claims != 1 || len(rep.Candidates) != 1 || rep.Candidates[0].Claims != 1 {
		t.Fatalf("report %+v", rep)
	}
	if len(lines) == 0 || lines[len(lines)-1].Percent != 100 {
		t.Fatalf("progress lines %+v", lines)
	}
	if after, _ := f.H.Store.LastSeq(context.Background()); after != last {
		t.Fatalf("the what-if wrote to the log: %d -> %d", last, after)
	}
	// A period before the pool existed has nothing to replay.
	_, err = f.Client.WhatIf(context.Background(), whatif.Request{From: from.Add(-48 * time.Hour), To: from.Add(-47 * time.Hour),
		Candidates: []whatif.RequestCandidate{{Name: "same.yaml", Pool: whatIfPool}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "nothing to replay") {
		t.Fatalf("a period before the pool: %v", err)
	}
}

// TestWhatIfsAtOnceAreCapped: past the server's cap of what-ifs at once
// (1 by default), one more is answered 429 with Retry-After and a message
// naming the cap, to the read-only token as to the admin one; once one
// ends, the next runs.
func TestWhatIfsAtOnceAreCapped(t *testing.T) {
	f := resttest.Start(t)
	f.H.Declare("homelab", events.GroupSpec{}, "node-1.lan")
	from := f.H.Clock.Now().UTC()
	f.Do(decide.IncreaseSize{Group: "homelab", Delta: 1, RequestedBy: "cluster-autoscaler"})
	f.H.Clock.Step(time.Hour)
	body, _ := json.Marshal(whatif.Request{From: from, To: from.Add(time.Hour), Seed: 1, Candidates: []whatif.RequestCandidate{{Name: "same.yaml", Pool: whatIfPool}}})

	two := httptest.NewServer(rest.New(f.H.Views, f.H.Service, f.H.Store, f.H.Clock, rest.Options{Token: resttest.Token, ReadToken: resttest.ReadToken, MaxWhatIfs: 2}))
	defer two.Close()
	// Closed before the servers, which wait for the handlers.
	var opened []net.Conn
	defer func() {
		for _, c := range opened {
			c.Close()
		}
	}()
	for _, c := range []struct {
		url string
		max int
	}{{f.Server.URL, rest.DefaultMaxWhatIfs}, {two.URL, 2}} {
		// A what-if holds its place from the moment it is asked: a held
		// one sends its headers and half its body, and waits.
		hold := func() net.Conn {
			t.Helper()
			conn, err := net.DialTimeout("tcp", strings.TrimPrefix(c.url, "http://"), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			opened = append(opened, conn)
			fmt.Fprintf(conn, "POST /api/v1/whatif HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", resttest.ReadToken, len(body), body[:len(body)/2])
			return conn
		}
		// answered reports whether a held one got an answer (429: it
		// came second to one of the asks below).
		answered := func(conn net.Conn) bool {
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := conn.Read(make([]byte, 1))
			var ne net.Error
			return !errors.As(err, &ne) || !ne.Timeout()
		}
		held := make([]net.Conn, c.max)
		for i := range held {
			held[i] = hold()
		}
		ask := func(token string) (int, string, rest.ErrorBody) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodPost, c.url+"/api/v1/whatif", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var eb rest.ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&eb)
			return resp.StatusCode, resp.Header.Get("Retry-After"), eb
		}
		eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			for i, h := range held {
				if answered(h) {
					h.Close()
					held[i] = hold()
				}
			}
			status, retry, eb := ask(resttest.ReadToken)
			want := fmt.Sprintf("runs at most %d at a time (serve's --api-max-whatifs)", c.max)
			if status != http.StatusTooManyRequests || retry == "" || eb.Code != "ResourceExhausted" || !strings.Contains(eb.Error, want) {
				return fmt.Errorf("with %d held: %d, Retry-After %q, %+v; want 429 saying %q", c.max, status, retry, eb, want)
			}
			return nil
		})
		if status, _, eb := ask(resttest.Token); status != http.StatusTooManyRequests {
			t.Errorf("the admin token past the cap: %d %+v, want 429", status, eb)
		}
		// One ends (its client goes): the next runs.
		held[0].Close()
		eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			if status, _, eb := ask(resttest.ReadToken); status != http.StatusOK {
				return fmt.Errorf("after one ended: %d %+v", status, eb)
			}
			return nil
		})
		for _, h := range held {
			h.Close()
		}
	}
}
