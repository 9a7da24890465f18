package telemetry

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// Instrument names. The Prometheus exporter appends the unit (_seconds)
// and, to counters, _total; the scrape names are in the comments.
const (
	// claimstream_claims{group,phase}: live claims in the views.
	InstClaims = "claimstream_claims"
	// claimstream_claim_time_to_ready_seconds{group}: ClaimReady time -
	// requestedAt.
	InstTimeToReady = "claimstream_claim_time_to_ready"
	// claimstream_claim_attempts{group}: the attempt of each ClaimBooting.
	InstAttempts = "claimstream_claim_attempts"
	// claimstream_claim_failures_total{group,reason}.
	InstFailures = "claimstream_claim_failures"
	// claimstream_deadline_misses_total{group}: ClaimFailed DeadlineExceeded.
	InstDeadlineMisses = "claimstream_deadline_misses"
	// claimstream_shutdown_attempts_total{group,force}: ShutdownFired.
	InstShutdownAttempts = "claimstream_shutdown_attempts"
	// claimstream_shutdown_attempt_limits_total{group}:
	// ShutdownAttemptLimitReached and UnclaimedShutdownPaused.
	InstShutdownLimits = "claimstream_shutdown_attempt_limits"
	// claimstream_host_joins_refused_total{group}: HostJoinRefused.
	InstJoinsRefused = "claimstream_host_joins_refused"
	// claimstream_append_duration_seconds{outcome=ok|conflict|error}.
	InstAppendDuration = "claimstream_append_duration"
	// claimstream_projection_lag_events: the log's last seq - the views' seq.
	InstProjectionLag = "claimstream_projection_lag_events"
	// claimstream_sink_delivery_failures_total{sink}: failed attempts.
	InstSinkFailures = "claimstream_sink_delivery_failures"
	// claimstream_sink_deliveries_total{sink}: events a webhook accepted.
	InstSinkDeliveries = "claimstream_sink_deliveries"
	// claimstream_sink_dead_letters_total{sink}: events given up on.
	InstSinkDeadLetters = "claimstream_sink_dead_letters"
)

// Metrics are claimstream's instruments. They are fed by the hooks of the
// views (OnEvent), the command service (OnAppend) and the sinks
// (sinks.Metrics), and observe the views (ObserveViews); nothing polls.
type Metrics struct {
	meter   metric.Meter
	views   atomic.Pointer[projections.Runner]
	history historyInstruments

	timeToReady    metric.Float64Histogram
	attempts       metric.Int64Histogram
	failures       metric.Int64Counter
	deadlineMisses metric.Int64Counter
	shutdowns      metric.Int64Counter
	shutdownLimits metric.Int64Counter
	joinsRefused   metric.Int64Counter
	appendDuration metric.Float64Histogram
	sinkFailures   metric.Int64Counter
	sinkDelivered  metric.Int64Counter
	sinkDead       metric.Int64Counter
	claims         metric.Int64ObservableGauge
	lag            metric.Int64ObservableGauge
	pool           poolInstruments
	backup         backupInstruments

	// tlsReloadFailures: tls.go.
	tlsReloadFailures metric.Int64Counter
	// queue: the reactors' work queue (queue.go).
	queue queueInstruments
	// cost: the cost counters (cost.go).
	cost costInstruments
	// viewInst: claims created and slots by state (views.go).
	viewInst viewInstruments
	// kubeWriteFailures: Kubernetes Events and the status ConfigMap (kube.go).
	kubeWriteFailures metric.Int64Counter
	powerReadings     metric.Int64Counter
	// kubeRateLimiter: the API client's waits for its rate limiter (kube.go).
	kubeRateLimiter metric.Float64Histogram
	// sinkNames: the sinks whose counters start at zero (atzero.go).
	sinkNames atomic.Pointer[[]string]
	// dashboard: logins and CSRF refusals (dashboard.go).
	dashboard dashboardInstruments
	// authFailures: failed authentications, API and dashboard (auth.go).
	authFailures metric.Int64Counter
	// leading: whether this replica leads, once known (leadership.go).
	leading atomic.Pointer[func() bool]
}

// NewMetrics creates the instruments on meter.
func NewMetrics(meter metric.Meter) (*Metrics, error) {
	m := &Metrics{meter: meter}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	m.timeToReady, err = meter.Float64Histogram(InstTimeToReady, metric.WithUnit("s"),
		metric.WithDescription("Time from a claim's request to its ClaimReady."),
		metric.WithExplicitBucketBoundaries(timeToReadyBounds...))
	add(err)
	m.attempts, err = meter.Int64Histogram(InstAttempts,
		metric.WithDescription("The attempt (machine bought in the slot's streak) of each ClaimBooting."),
		metric.WithExplicitBucketBoundaries(attemptBounds...))
	add(err)
	m.failures, err = meter.Int64Counter(InstFailures, metric.WithDescription("Claims failed, by reason."))
	add(err)
	m.deadlineMisses, err = meter.Int64Counter(InstDeadlineMisses, metric.WithDescription("Claims failed DeadlineExceeded."))
	add(err)
	m.shutdowns, err = meter.Int64Counter(InstShutdownAttempts, metric.WithDescription("Shutdown Jobs fired (ShutdownFired)."))
	add(err)
	m.shutdownLimits, err = meter.Int64Counter(InstShutdownLimits, metric.WithDescription("Machines that stayed up after their bound of shutdown Jobs (ShutdownAttemptLimitReached, UnclaimedShutdownPaused)."))
	add(err)
	m.joinsRefused, err = meter.Int64Counter(InstJoinsRefused, metric.WithDescription("Nodes that joined unexpected (HostJoinRefused)."))
	add(err)
	m.appendDuration, err = meter.Float64Histogram(InstAppendDuration, metric.WithUnit("s"),
		metric.WithDescription("Latency of one append to the event log."),
		metric.WithExplicitBucketBoundaries(appendBounds...))
	add(err)
	m.sinkFailures, err = meter.Int64Counter(InstSinkFailures, metric.WithDescription("Failed webhook delivery attempts."))
	add(err)
	m.sinkDelivered, err = meter.Int64Counter(InstSinkDeliveries, metric.WithDescription("Events a webhook sink accepted."))
	add(err)
	m.sinkDead, err = meter.Int64Counter(InstSinkDeadLetters, metric.WithDescription("Events a webhook sink gave up on (dead-lettered)."))
	add(err)
	m.claims, err = meter.Int64ObservableGauge(InstClaims, metric.WithDescription("Claims in the live views, by group and phase."))
	add(err)
	m.lag, err = meter.Int64ObservableGauge(InstProjectionLag, metric.WithDescription("Events in the log the views have not folded yet."))
	add(err)
	m.pool, err = newPoolInstruments(meter)
	add(err)
	m.backup, err = newBackupInstruments(meter)
	add(err)
	add(m.newTLSInstruments(meter))
	add(m.newQueueInstruments(meter))
	add(m.newCostInstruments(meter))
	add(m.newViewInstruments(meter))
	add(m.newKubeInstruments(meter))
	add(m.newPowerInstruments(meter))
	add(m.newDashboardInstruments(meter))
	add(m.newAuthInstruments(meter))
	add(m.registerCheckpoints())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	_, err = meter.RegisterCallback(m.observe, m.claims, m.lag)
	if err != nil {
		return nil, err
	}
	if err := m.registerLogHealth(); err != nil {
		return nil, err
	}
	if err := m.registerIndexHistory(); err != nil {
		return nil, err
	}
	return m, nil
}

// ObserveViews makes the gauges read views. Call it once the runner exists
// (its RunnerOptions.OnEvent being m.OnEvent).
func (m *Metrics) ObserveViews(views *projections.Runner) { m.views.Store(views) }

// phases are the phases of live claims: a failed or completed claim
// waiting for its collection is no longer a claim.
var phases = []projections.Phase{projections.PhasePending, projections.PhaseBooting, projections.PhaseReady}

func (m *Metrics) observe(ctx context.Context, o metric.Observer) error {
	v := m.views.Load()
	if v == nil {
		return nil
	}
	type key struct{ group, phase string }
	counts := map[key]int64{}
	var groups []string
	v.Read(func(s *projections.State) {
		for name, g := range s.Groups {
			if !g.Retired {
				groups = append(groups, name)
			}
		}
		for _, c := range s.Claims {
			if c.IsLive() {
				counts[key{c.Group, string(c.Phase.Normal())}]++
			}
		}
	})
	sort.Strings(groups)
	seen := map[key]bool{}
	// Every phase of every group, zeros included, so a series drops to 0
	// rather than vanishing.
	for _, g := range groups {
		for _, p := range phases {
			k := key{g, string(p)}
			seen[k] = true
			o.ObserveInt64(m.claims, counts[k], metric.WithAttributes(attribute.String("group", g), attribute.String("phase", string(p))))
		}
	}
	for k, n := range counts {
		if !seen[k] {
			o.ObserveInt64(m.claims, n, metric.WithAttributes(attribute.String("group", k.group), attribute.String("phase", k.phase)))
		}
	}
	seq := v.ReadTo() // sequences known lost are not lag
	_, last, err := v.CaughtUp(ctx)
	if err != nil {
		return nil // the log is unreachable: report no lag rather than fail the scrape
	}
	lag := int64(0)
	if last > seq {
		lag = int64(last - seq)
	}
	o.ObserveInt64(m.lag, lag)
	return nil
}

// OnEvent is the views' RunnerOptions.OnEvent: it counts each newly folded
// event (not the history folded at start).
func (m *Metrics) OnEvent(e events.Event) {
	if e.Data == nil {
		return
	}
	ctx := context.Background()
	ref := e.Data.Reference()
	group := metric.WithAttributes(attribute.String("group", ref.Group))
	switch d := e.Data.(type) {
	case events.ClaimReady:
		v := m.views.Load()
		if v == nil {
			return
		}
		var requested time.Time
		v.Read(func(s *projections.State) {
			if c := s.Claims[d.Claim]; c != nil {
				requested = c.RequestedAt
			}
		})
		if !requested.IsZero() && !e.Time.Before(requested) {
			m.timeToReady.Record(ctx, e.Time.Sub(requested).Seconds(), group)
		}
	case events.ClaimCreated:
		m.claimCreated(d)
	case events.ClaimBooting:
		m.attempts.Record(ctx, int64(d.Attempt), group)
	case events.ClaimFailed:
		m.failures.Add(ctx, 1, metric.WithAttributes(attribute.String("group", ref.Group), attribute.String("reason", d.Reason)))
		if d.Reason == projections.ReasonDeadlineExceeded {
			m.deadlineMisses.Add(ctx, 1, group)
		}
	case events.ShutdownFired:
		m.shutdowns.Add(ctx, 1, metric.WithAttributes(attribute.String("group", ref.Group), attribute.Bool("force", d.Force)))
	case events.ShutdownAttemptLimitReached, events.UnclaimedShutdownPaused:
		m.shutdownLimits.Add(ctx, 1, group)
	case events.HostJoinRefused:
		m.joinsRefused.Add(ctx, 1, group)
	}
}

// OnAppend is the command service's OnAppend.
func (m *Metrics) OnAppend(ctx context.Context, took time.Duration, _ int, err error) {
	outcome := "ok"
	switch {
	case errors.Is(err, eventlog.ErrConflict):
		outcome = "conflict"
	case err != nil:
		outcome = "error"
	}
	m.appendDuration.Record(ctx, took.Seconds(), metric.WithAttributes(attribute.String("outcome", outcome)))
}

// DeliveryFailed implements sinks.Metrics.
func (m *Metrics) DeliveryFailed(sink string) {
	m.sinkFailures.Add(context.Background(), 1, metric.WithAttributes(attribute.String("sink", sink)))
}

// Delivered implements sinks.Metrics.
func (m *Metrics) Delivered(sink string) {
	m.sinkDelivered.Add(context.Background(), 1, metric.WithAttributes(attribute.String("sink", sink)))
}

// DeadLettered implements sinks.Metrics.
func (m *Metrics) DeadLettered(sink string) {
	m.sinkDead.Add(context.Background(), 1, metric.WithAttributes(attribute.String("sink", sink)))
}
