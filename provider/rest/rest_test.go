package rest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// fill puts a value into every {param} of a route path.
func fill(path string) string {
	for {
		i := strings.Index(path, "{")
		if i < 0 {
			return path
		}
		j := strings.Index(path, "}")
		path = path[:i] + "node-1.lan" + path[j+1:]
	}
}

func TestNoOrWrongTokenIs401AndChangesNothing(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	before, err := f.H.Store.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", "wrong", resttest.Token + "x", strings.ToUpper(resttest.Token)} {
		for _, r := range rest.Routes() {
			method, path, _ := strings.Cut(r, " ")
			req, _ := http.NewRequest(method, f.Server.URL+fill(path), strings.NewReader(`{"by":"mallory"}`))
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body rest.ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			public := !strings.HasPrefix(path, "/api/")
			switch {
			case public && resp.StatusCode == http.StatusUnauthorized:
				t.Errorf("%s without auth: %d, want it served", r, resp.StatusCode)
			case !public && (resp.StatusCode != http.StatusUnauthorized || body.Code != "Unauthenticated" || resp.Header.Get("WWW-Authenticate") == ""):
				t.Errorf("%s with token %q: %d %+v, want 401 Unauthenticated", r, token, resp.StatusCode, body)
			}
		}
	}
	after, _ := f.H.Store.LastSeq(ctx)
	if after != before {
		t.Fatalf("unauthenticated requests wrote: log went %d -> %d", before, after)
	}
	// A server with no token configured refuses every /api request.
	h := rest.New(f.H.Views, f.H.Service, f.H.Store, f.H.Clock, rest.Options{})
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest("GET", "/api/v1/groups", nil)
	req.Header.Set("Authorization", "Bearer ")
	h.ServeHTTP(rec, req)
	if rec.status != http.StatusUnauthorized {
		t.Fatalf("no configured token: %d", rec.status)
	}
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int)           { r.status = s }

// TestReplayEqualsTheLiveViewsAtEveryPoint replays the log to every event
// time (and every sequence) of the scripted history and compares with the
// live views recorded at that moment.
func TestReplayEqualsTheLiveViewsAtEveryPoint(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	// The last point of every distinct time is the live view at that time.
	lastAt := map[time.Time]resttest.Point{}
	for _, p := range f.Points {
		lastAt[p.At] = p
	}
	// Every event time of the log has its point.
	var times []time.Time
	err := f.H.Store.Read(ctx, 1, 0, func(e events.Event) error {
		if len(times) == 0 || !times[len(times)-1].Equal(e.Time) {
			times = append(times, e.Time.UTC())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(times) < 15 {
		t.Fatalf("history has %d event times", len(times))
	}
	for _, at := range times {
		p, ok := lastAt[at]
		if !ok {
			t.Fatalf("no live view recorded at %s", at)
		}
		got, err := f.Client.ReplayAt(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "replay --at "+at.Format(time.RFC3339), got, p.Views)
	}
	for _, p := range f.Points {
		got, err := f.Client.ReplaySeq(ctx, p.Seq)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "replay --seq "+p.At.String(), got, p.Views)
	}
	// Before the first event, the views are empty.
	got, err := f.Client.ReplayAt(ctx, times[0].Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 0 || len(got.Groups)+len(got.Slots)+len(got.Claims) != 0 {
		t.Fatalf("replay before the log: %+v", got)
	}
}

func same(t *testing.T, what string, got, want rest.Replay) {
	t.Helper()
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	if !bytes.Equal(g, w) {
		t.Fatalf("%s differs from the live views:\n--- replay\n%s\n--- live\n%s", what, g, w)
	}
}

func TestAuditTellsTwoAttemptsAndAForcedShutdown(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	slot, err := f.Client.AuditSlot(ctx, "node-1.lan")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slot.Claims, []string{f.Claims["first"], f.Claims["second"]}) {
		t.Fatalf("slot audit tells claims %v", slot.Claims)
	}
	text := func(a rest.Audit) string {
		var b strings.Builder
		for _, l := range a.Lines {
			b.WriteString(l.Claim + " " + l.Text + "\n")
		}
		return b.String()
	}
	st := text(slot)
	for _, want := range []string{
		f.Claims["first"] + " requested by cluster-autoscaler via IncreaseSize(+2) for group homelab; attempt 1",
		f.Claims["first"] + " failed DeadlineExceeded",
		"forced shutdown ordered",
		f.Claims["first"] + " shutdown 1 of 3: Job " + f.Claims["first"] + "-stop-1 (forced)",
		f.Claims["second"] + " requested by cluster-autoscaler via IncreaseSize(+2) for group homelab; attempt 2",
		f.Claims["second"] + " booting: attempt 2, startup Job " + f.Claims["second"] + "-start-2",
		"Ready after 3m22s",
		"scale-down by cluster-autoscaler via DeleteNodes(node-1.lan)",
		"shutdown 2 of 3",
		"completed ScaledDown",
	} {
		if !strings.Contains(st, want) {
			t.Errorf("slot audit lacks %q:\n%s", want, st)
		}
	}
	// The second claim alone says attempt 2 and nothing of the first.
	second, err := f.Client.AuditClaim(ctx, f.Claims["second"], "")
	if err != nil {
		t.Fatal(err)
	}
	if s := text(second); !strings.Contains(s, "attempt 2") || strings.Contains(s, f.Claims["first"]) {
		t.Errorf("claim audit:\n%s", s)
	}
	// The first claim was collected: it is not in the views, yet its
	// story is found from the slots it could belong to.
	if _, err := f.Client.Claim(ctx, f.Claims["first"]); apiCode(err) != "NotFound" {
		t.Fatalf("collected claim in the views: %v", err)
	}
	first, err := f.Client.AuditClaim(ctx, f.Claims["first"], "")
	if err != nil {
		t.Fatal(err)
	}
	if s := text(first); !strings.Contains(s, "forced shutdown ordered") || !strings.Contains(s, "collected") {
		t.Errorf("collected claim audit:\n%s", s)
	}
	// An unknown claim says how to find a collected one.
	_, err = f.Client.AuditClaim(ctx, "nope-123456", "")
	if apiCode(err) != "NotFound" || !strings.Contains(err.Error(), "--slot") {
		t.Fatalf("unknown claim: %v", err)
	}
	_, err = f.Client.AuditClaim(ctx, f.Claims["first"], "node-2.lan")
	if apiCode(err) != "NotFound" {
		t.Fatalf("claim on the wrong slot: %v", err)
	}
}

func apiCode(err error) string {
	var ae *rest.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func TestCommandsAndTheirErrors(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	cases := []struct {
		name string
		do   func() error
		code string
	}{
		{"claim a decommissioned slot", func() error {
			_, err := f.Client.ManualClaim(ctx, "node-3.lan", rest.CommandRequest{By: "carol"})
			return err
		}, "FailedPrecondition"},
		{"claim an unknown slot", func() error {
			_, err := f.Client.ManualClaim(ctx, "node-9", rest.CommandRequest{})
			return err
		}, "NotFound"},
		{"delete an ended claim", func() error {
			_, err := f.Client.DeleteClaim(ctx, f.Claims["broken"], rest.CommandRequest{})
			return err
		}, "FailedPrecondition"},
		{"unknown group", func() error { _, err := f.Client.Group(ctx, "nope"); return err }, "NotFound"},
		{"bad replay", func() error { return f.Client.Get(ctx, "/api/v1/replay", nil, nil) }, "InvalidArgument"},
		{"replay past the end", func() error { _, err := f.Client.ReplaySeq(ctx, 1e6); return err }, "NotFound"},
		{"bad event type", func() error {
			return f.Client.Events(ctx, rest.EventQuery{Types: []string{"Nope"}}, func(rest.Event) error { return nil })
		}, "InvalidArgument"},
		{"unknown route", func() error { return f.Client.Get(ctx, "/api/v1/nope", nil, nil) }, "NotFound"},
	}
	for _, c := range cases {
		if got := apiCode(c.do()); got != c.code {
			t.Errorf("%s: code %q, want %q", c.name, got, c.code)
		}
	}
	res, err := f.Client.Recommission(ctx, "node-3.lan", rest.CommandRequest{By: "carol"})
	if err != nil || len(res.Events) != 1 || res.Events[0].Type != events.TypeSlotRecommissioned {
		t.Fatalf("recommission: %+v %v", res, err)
	}
	res, err = f.Client.ManualClaim(ctx, "node-3.lan", rest.CommandRequest{By: "carol", Reason: "test"})
	if err != nil || len(res.Claims) != 1 {
		t.Fatalf("manual claim: %+v %v", res, err)
	}
	c, err := f.Client.Claim(ctx, res.Claims[0])
	if err != nil || c.RequestedBy != "carol" || c.Request.Call != events.CallManual {
		t.Fatalf("claim: %+v %v", c, err)
	}
	res, err = f.Client.DeleteClaim(ctx, c.Name, rest.CommandRequest{By: "carol"})
	if err != nil || len(res.Events) != 1 || res.Events[0].Type != events.TypeClaimCancelled {
		t.Fatalf("delete claim: %+v %v", res, err)
	}
	res, err = f.Client.Decommission(ctx, "node-2.lan", rest.CommandRequest{By: "carol", Reason: "disk"})
	if err != nil || len(res.Events) != 2 || res.Events[1].Type != events.TypeScaleDownRequested {
		t.Fatalf("decommission a ready slot: %+v %v", res, err)
	}
	// Twice is a no-op.
	res, err = f.Client.Decommission(ctx, "node-2.lan", rest.CommandRequest{By: "carol"})
	if err != nil || len(res.Events) != 0 {
		t.Fatalf("decommission again: %+v %v", res, err)
	}
}

func TestStatusOfEveryCode(t *testing.T) {
	want := map[decide.Code]int{
		decide.CodeInvalidArgument: 400, decide.CodeNotFound: 404, decide.CodeFailedPrecondition: 412,
		decide.CodeUnavailable: 503, decide.CodeAborted: 409, 0: 500,
	}
	for code, status := range want {
		if got := rest.StatusOf(code); got != status {
			t.Errorf("%v: %d, want %d", code, got, status)
		}
	}
}

func TestEventsFilterFollowAndExport(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	var got []rest.Event
	collect := func(q rest.EventQuery) {
		got = nil
		if err := f.Client.Events(ctx, q, func(e rest.Event) error { got = append(got, e); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	collect(rest.EventQuery{Slot: "node-1.lan"})
	if len(got) < 10 || slices.ContainsFunc(got, func(e rest.Event) bool { return e.Slot != "node-1.lan" }) {
		t.Fatalf("slot filter: %d events", len(got))
	}
	collect(rest.EventQuery{Claim: f.Claims["second"]})
	if len(got) != 7 || slices.ContainsFunc(got, func(e rest.Event) bool { return e.Claim != f.Claims["second"] }) {
		t.Fatalf("claim filter: %d events", len(got))
	}
	collect(rest.EventQuery{Types: []string{"ClaimFailed"}})
	if len(got) != 2 {
		t.Fatalf("type filter: %d events", len(got))
	}
	collect(rest.EventQuery{Types: []string{"ClaimReady", "ClaimFailed"}, Since: f.Points[0].At.Add(10 * time.Minute)})
	if len(got) != 3 {
		t.Fatalf("types since: %d events", len(got))
	}
	collect(rest.EventQuery{Last: 2})
	if last, _ := f.H.Store.LastSeq(ctx); len(got) != 2 || got[1].Seq != last {
		t.Fatalf("last 2: %+v", got)
	}
	// Follow: the stream shows what is appended after it started.
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	seen := make(chan rest.Event, 100)
	go func() {
		_ = f.Client.Events(fctx, rest.EventQuery{Slot: "node-2.lan", Follow: true}, func(e rest.Event) error { seen <- e; return nil })
		close(seen)
	}()
	var n int
	for e := range seen {
		n++
		if e.Type == events.TypeClaimReady {
			break // history read; now append
		}
	}
	f.H.MustExec(decide.Decommission{Slot: "node-2.lan", By: "dave"})
	for e := range seen {
		if e.Type == events.TypeScaleDownRequested {
			cancel()
			break
		}
	}
	if fctx.Err() == nil || errors.Is(fctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("follow did not show the new events")
	}
	// Export: CloudEvents structured mode, one per line.
	var buf bytes.Buffer
	if err := f.Client.Export(ctx, rest.EventQuery{Slot: "gpu-1"}, &buf); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	lines := 0
	for sc.Scan() {
		var ce map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ce); err != nil {
			t.Fatal(err)
		}
		if ce["specversion"] != "1.0" || ce["slot"] != "gpu-1" || ce["sequence"] == nil || ce["data"] == nil || !strings.HasPrefix(ce["type"].(string), "dev.claimstream.") {
			t.Fatalf("not a structured CloudEvent: %s", sc.Bytes())
		}
		lines++
	}
	if lines != 2 {
		t.Fatalf("export of gpu-1: %d lines", lines)
	}
}

func TestHealthAndReady(t *testing.T) {
	f := resttest.Start(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(f.Server.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	// Views that do not follow the log are not ready: a runner started
	// and not running falls behind the next append.
	behind := projections.NewRunner(f.H.Store, projections.RunnerOptions{})
	if err := behind.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.H.Declare("g", events.GroupSpec{}, "s-1")
	h := rest.New(behind, f.H.Service, f.H.Store, f.H.Clock, rest.Options{Token: resttest.Token})
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httptestRequest("GET", "/readyz"))
	var body rest.Health
	_ = json.Unmarshal(rec.body.Bytes(), &body)
	if rec.status != http.StatusServiceUnavailable || body.Lag != 2 {
		t.Fatalf("readyz of views behind the log: %d %s", rec.status, rec.body.String())
	}
	rec = &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httptestRequest("GET", "/healthz"))
	if rec.status != http.StatusOK {
		t.Fatalf("healthz: %d", rec.status)
	}
}

func httptestRequest(method, path string) *http.Request {
	req, _ := http.NewRequest(method, path, nil)
	return req
}

// TestOpenAPIDescribesEveryRoute: every route the mux serves is in
// schemas/openapi.yaml and every path and method there is served.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "schemas", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	// The read-only token's 403 is documented on every admin route.
	for _, r := range rest.AdminRoutes() {
		method, path, _ := strings.Cut(r, " ")
		responses, _ := doc.Paths[path][strings.ToLower(method)]["responses"].(map[string]any)
		if _, ok := responses["403"]; !ok {
			t.Errorf("%s refuses the read-only token with 403, but openapi.yaml does not say so", r)
		}
	}
	served := rest.Routes()
	sort.Strings(documented)
	sort.Strings(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("openapi.yaml and the mux disagree:\n documented %v\n served     %v", documented, served)
	}
	// And each documented route reaches a handler, not the mux's 404/405.
	f := resttest.Start(t)
	for _, r := range documented {
		method, path, _ := strings.Cut(r, " ")
		req, _ := http.NewRequest(method, f.Server.URL+fill(path), nil)
		req.Header.Set("Authorization", "Bearer "+resttest.Token)
		q := req.URL.Query()
		if strings.HasSuffix(path, "/replay") {
			q.Set("seq", "1")
		}
		req.URL.RawQuery = q.Encode()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body rest.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed || strings.Contains(body.Error, "no route") {
			t.Errorf("%s is documented but not served: %d %s", r, resp.StatusCode, body.Error)
		}
	}
}
