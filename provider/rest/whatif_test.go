package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
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
	f.Do(handlers.IncreaseSize{Group: "homelab", Delta: 1, RequestedBy: "cluster-autoscaler"})
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
