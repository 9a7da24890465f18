package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/internal/buildinfo"
	"github.com/claimstream/claimstream/projections"
)

func scrapeText(t *testing.T, tel *Telemetry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func newTel(t *testing.T, h *handlerstest.Harness) *Telemetry {
	t.Helper()
	tel, err := Setup(context.Background(), Options{Prometheus: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Build: buildinfo.Info{Version: "v9.9.9", Revision: "abc", GoVersion: "go1.26.0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	tel.Metrics.ObserveViews(h.Views)
	tel.Metrics.SetClock(h.Clock)
	return tel
}

var helpLine = regexp.MustCompile(`(?m)^# HELP (\S+) (.*)$`)

func helps(body string) map[string]string {
	out := map[string]string{}
	for _, m := range helpLine.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

var bucketLine = regexp.MustCompile(`(?m)^(\S+)_bucket\{[^}]*le="([^"]+)"`)

func bucketsOf(body, name string) []string {
	var out []string
	for _, m := range bucketLine.FindAllStringSubmatch(body, -1) {
		if m[1] == name && !slices.Contains(out, m[2]) {
			out = append(out, m[2])
		}
	}
	return out
}

// The zeros are indistinguishable from the instruments' own series: the
// same HELP and the same buckets; and a group added after start gets its
// zeros from the next scrape on.
func TestZerosMatchTheInstruments(t *testing.T) {
	h := handlerstest.New(t)
	tel := newTel(t, h)
	tel.Metrics.KnownSinks([]string{"alerts"})
	if err := tel.Metrics.ObserveLogHealth(eventlog.NewLogHealth(h.Clock.Now())); err != nil {
		t.Fatal(err)
	}
	h.Declare("g", events.GroupSpec{}, "a")
	zeros := scrapeText(t, tel)

	m := tel.Metrics
	ctx := context.Background()
	g := metric.WithAttributes(attribute.String("group", "g"))
	m.timeToReady.Record(ctx, 1, g)
	m.attempts.Record(ctx, 1, g)
	m.failures.Add(ctx, 1, metric.WithAttributes(attribute.String("group", "g"), attribute.String("reason", "X")))
	m.deadlineMisses.Add(ctx, 1, g)
	m.shutdowns.Add(ctx, 1, metric.WithAttributes(attribute.String("group", "g"), attribute.Bool("force", true)))
	m.shutdownLimits.Add(ctx, 1, g)
	m.joinsRefused.Add(ctx, 1, g)
	m.claimCreated(events.ClaimCreated{Ref: events.Ref{Group: "g"}, RequestedBy: "x"})
	m.OnAppend(ctx, time.Millisecond, 1, nil)
	m.WorkDone("slot", time.Millisecond, false)
	m.Reacted(time.Millisecond)
	m.BackupDone(time.Now(), 0, nil)
	m.TLSReloadFailed("x")
	m.PoolApplied(PoolFileRefused, io.EOF)
	m.KubeWriteFailed("event")
	m.DeliveryFailed("alerts")
	m.Delivered("alerts")
	m.DeadLettered("alerts")
	m.AuthFailure("api", "refused")
	real := scrapeText(t, tel)

	zh, rh := helps(zeros), helps(real)
	for _, zf := range m.zeroFamilies() {
		if zh[zf.name] == "" {
			t.Errorf("%s: no zeros at start", zf.name)
			continue
		}
		if zh[zf.name] != rh[zf.name] {
			t.Errorf("%s: HELP of the zeros %q, of the instrument %q", zf.name, zh[zf.name], rh[zf.name])
		}
		if zf.typ.String() == "HISTOGRAM" {
			if zb, rb := bucketsOf(zeros, zf.name), bucketsOf(real, zf.name); !slices.Equal(zb, rb) {
				t.Errorf("%s: buckets of the zeros %v, of the instrument %v", zf.name, zb, rb)
			}
		}
	}
	// The instruments' series replace the zeros, the others stay.
	for _, line := range []string{
		`claimstream_deadline_misses_total{group="g"} 1`,
		`claimstream_claim_failures_total{group="g",reason="DeadlineExceeded"} 0`,
		`claimstream_claim_failures_total{group="g",reason="X"} 1`,
		`claimstream_shutdown_attempts_total{force="false",group="g"} 0`,
		`claimstream_shutdown_attempts_total{force="true",group="g"} 1`,
		`claimstream_build_info{go_version="go1.26.0",revision="abc",version="v9.9.9"} 1`,
		`claimstream_log_write_failures_total{reason="no_space"} 0`,
		`claimstream_log_append_resends_total 0`,
	} {
		if !strings.Contains(real, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if strings.Count(real, `claimstream_deadline_misses_total{group="g"}`) != 1 {
		t.Error("a series is on the scrape twice")
	}

	h.Declare("later", events.GroupSpec{}, "b")
	if body := scrapeText(t, tel); !strings.Contains(body, `claimstream_claim_time_to_ready_seconds_count{group="later"} 0`+"\n") {
		t.Errorf("a group added after start has no zeros:\n%s", body)
	}
}

// claimstream_claims counts live claims; claimstream_slots counts every
// slot by state, resting included, and claimstream_claims_created_total
// counts who asked.
func TestClaimsAndSlotsGauges(t *testing.T) {
	h := handlerstest.New(t)
	tel := newTel(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	views := projections.NewRunner(h.Store, projections.RunnerOptions{OnEvent: tel.Metrics.OnEvent, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- views.Run(ctx) }()
	defer func() { cancel(); <-done }()
	tel.Metrics.ObserveViews(views)

	h.Declare("g", events.GroupSpec{}, "a", "b", "c")
	h.Declare("r", events.GroupSpec{}, "r1")
	claims := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "cluster-autoscaler"}).Claims()
	h.MustExec(decide.BootClaim{Claim: claims[0]})
	res := h.MustExec(decide.FailClaim{Claim: claims[1], Reason: projections.ReasonStartupJobFailed})
	// r1 rests: its boots failed MaxConsecutiveAttempts times in a row.
	for range projections.MaxConsecutiveAttempts {
		c := h.MustExec(decide.IncreaseSize{Group: "r", Delta: 1, RequestedBy: "op"}).Claims()[0]
		h.MustExec(decide.BootClaim{Claim: c})
		res = h.MustExec(decide.FailClaim{Claim: c, Reason: projections.ReasonStartupJobFailed})
	}
	if err := views.WaitFor(ctx, res.Last); err != nil {
		t.Fatal(err)
	}
	body := scrapeText(t, tel)
	for _, line := range []string{
		`claimstream_claims{group="g",phase="booting"} 1`,
		`claimstream_claims{group="g",phase="pending"} 0`,
		`claimstream_slots{group="g",state="booting"} 1`,
		`claimstream_claims_created_total{group="g",requester="cluster-autoscaler"} 2`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if strings.Contains(body, `phase="failed"`) {
		t.Error("failed claims awaiting collection are counted as claims")
	}
	for _, line := range []string{
		`claimstream_slots{group="r",state="resting"} 1`,
		`claimstream_slots{group="r",state="off"} 0`,
		`claimstream_claims_created_total{group="r",requester="cluster-autoscaler"} 3`,
		`claimstream_slots{group="g",state="off"} 2`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

var labelValue = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// No label of the scrape takes a caller's text: claims asked for with
// odd requesters (the provider's under mTLS, a REST caller's free --by)
// count under the bounded requester kinds, and none of the texts shows.
func TestNoMetricLabelTakesCallerText(t *testing.T) {
	h := handlerstest.New(t)
	tel := newTel(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	views := projections.NewRunner(h.Store, projections.RunnerOptions{OnEvent: tel.Metrics.OnEvent, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- views.Run(ctx) }()
	defer func() { cancel(); <-done }()
	tel.Metrics.ObserveViews(views)

	weird := []string{"cluster-autoscaler (cn=ca.example.org)", `evil"} 1` + "\n" + `x{a="b`, "👾", strings.Repeat("long", 100), "dashboard-x", "scenario2"}
	h.Declare("g", events.GroupSpec{MaxSize: 20}, "a", "b", "c", "d", "e", "f", "m1", "m2", "m3", "m4", "m5", "m6", "m7")
	var last uint64
	for _, by := range weird {
		last = h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: by}).Last
	}
	for i, by := range append(weird, "dashboard") {
		last = h.MustExec(decide.ManualClaim{Slot: fmt.Sprintf("m%d", i+1), By: by, Reason: "test"}).Last
	}
	if err := views.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	body := scrapeText(t, tel)
	for _, m := range labelValue.FindAllStringSubmatch(body, -1) {
		if m[1] == "requester" && !slices.Contains(Requesters, m[2]) {
			t.Errorf("requester label %q is not one of %v", m[2], Requesters)
		}
	}
	for _, by := range weird {
		if strings.Contains(body, by) {
			t.Errorf("the scrape shows the caller's text %q", by)
		}
	}
	for _, line := range []string{
		`claimstream_claims_created_total{group="g",requester="cluster-autoscaler"} 6`,
		`claimstream_claims_created_total{group="g",requester="api"} 6`,
		`claimstream_claims_created_total{group="g",requester="dashboard"} 1`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// The view metrics are on the leader's scrape only: a follower, which
// folds the same log, shows its epoch 0 and none of them; when it becomes
// leader it exports them with what it has counted.
func TestViewMetricsOnTheLeaderOnly(t *testing.T) {
	h := handlerstest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type replica struct {
		tel   *Telemetry
		views *projections.Runner
		epoch atomic.Uint64
	}
	var reps [2]*replica
	for i := range reps {
		r := &replica{tel: newTel(t, h)}
		r.views = projections.NewRunner(h.Store, projections.RunnerOptions{OnEvent: r.tel.Metrics.OnEvent, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err := r.views.Start(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.views.Run(ctx) }()
		defer func() { cancel(); <-done }()
		r.tel.Metrics.ObserveViews(r.views)
		if err := r.tel.Metrics.ObserveLeadership(r.epoch.Load); err != nil {
			t.Fatal(err)
		}
		reps[i] = r
	}
	leader, follower := reps[0], reps[1]
	leader.epoch.Store(3)

	h.Declare("g", events.GroupSpec{}, "a", "b")
	claims := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "cluster-autoscaler"}).Claims()
	res := h.MustExec(decide.FailClaim{Claim: claims[1], Reason: projections.ReasonStartupJobFailed})
	for _, r := range reps {
		if err := r.views.WaitFor(ctx, res.Last); err != nil {
			t.Fatal(err)
		}
	}
	views := []string{
		`claimstream_claims{group="g",phase="pending"} 1`,
		`claimstream_slots{group="g",state="off"} 1`,
		`claimstream_claims_created_total{group="g",requester="cluster-autoscaler"} 2`,
		`claimstream_claim_failures_total{group="g",reason="StartupJobFailed"} 1`,
		`claimstream_deadline_misses_total{group="g"} 0`,
		`claimstream_host_joins_refused_total{group="g"} 0`,
		`claimstream_shutdown_attempt_limits_total{group="g"} 0`,
		`claimstream_claim_attempts_count{group="g"} 0`,
		`claimstream_machine_up_seconds_total{group="g",slot="a"} 0`,
		`claimstream_energy_joules_total{group="g"} 0`,
	}
	// The views hold an event (WaitFor) a moment before OnEvent has
	// counted it: the leader's scrape is polled, bounded.
	leads := func(name string, r *replica) {
		t.Helper()
		eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			body := scrapeText(t, r.tel)
			for _, line := range views {
				if !strings.Contains(body, line+"\n") {
					return fmt.Errorf("%s: the leader's scrape lacks %q", name, line)
				}
			}
			return nil
		})
	}
	follows := func(name string, r *replica) {
		t.Helper()
		body := scrapeText(t, r.tel)
		if !strings.Contains(body, "claimstream_leader_epoch 0\n") {
			t.Errorf("%s: the follower's scrape does not say it follows", name)
		}
		for _, fam := range ViewFamilies {
			if strings.Contains(body, "\n"+fam) {
				t.Errorf("%s: the follower's scrape has %s", name, fam)
			}
		}
		if !strings.Contains(body, "claimstream_projection_lag_events ") {
			t.Errorf("%s: the follower's scrape lacks its own lag", name)
		}
	}
	leads("first leader", leader)
	follows("follower", follower)

	// Failover: the follower takes over with the totals of the log.
	leader.epoch.Store(0)
	follower.epoch.Store(4)
	leads("new leader", follower)
	follows("old leader", leader)
}
