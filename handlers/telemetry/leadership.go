package telemetry

import (
	"context"
	"fmt"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// claimstream_leader_epoch: the leadership epoch this replica leads, 0 on
// a follower. Exactly one replica of a healthy set reports above 0; the
// views' lag behind the log is claimstream_projection_lag_events.
const InstLeaderEpoch = "claimstream_leader_epoch"

// ObserveLeadership reports epoch() (handlers.Leadership.Epoch, 0 while
// this replica does not lead) at each scrape. From then on the view
// metrics (ViewFamilies) are on the scrape of the leader only.
func (m *Metrics) ObserveLeadership(epoch func() uint64) error {
	leading := func() bool { return epoch() > 0 }
	m.leading.Store(&leading)
	g, err := m.meter.Int64ObservableGauge(InstLeaderEpoch,
		metric.WithDescription("Leadership epoch this replica leads (0: a follower)."))
	if err != nil {
		return fmt.Errorf("instrument %s: %w", InstLeaderEpoch, err)
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, int64(epoch()))
		return nil
	}, g)
	if err != nil {
		return fmt.Errorf("leadership metrics: %w", err)
	}
	return nil
}

// ViewFamilies are the scrape's metrics folded from the log that describe
// the pool. Every replica folds the same log, so they would be the same on
// each: only the leader exports them, and a pool alert or panel sees one
// series rather than one per replica. A follower's scrape shows
// claimstream_leader_epoch 0 instead. The instruments keep counting on a
// follower, so a replica that becomes leader exports its totals so far.
var ViewFamilies = []string{
	InstClaims,
	InstSlots,
	scrapeClaimsCreated,
	scrapeTimeToReady,
	scrapeAttempts,
	scrapeFailures,
	scrapeDeadlineMisses,
	scrapeShutdowns,
	scrapeShutdownLimits,
	scrapeJoinsRefused,
	InstMachineUp + "_seconds_total",
	InstEnergy + "_joules_total",
	InstCost + "_total",
}

// follows reports whether this replica knows it does not lead; without
// ObserveLeadership (a plane of one) it exports everything.
func (m *Metrics) follows() bool {
	p := m.leading.Load()
	return p != nil && !(*p)()
}

// leaderOnly drops the view metrics from a follower's scrape.
func (m *Metrics) leaderOnly(mfs []*dto.MetricFamily) []*dto.MetricFamily {
	if !m.follows() {
		return mfs
	}
	return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool { return slices.Contains(ViewFamilies, mf.GetName()) })
}

// ViewInstruments are the instruments behind ViewFamilies, by their
// OpenTelemetry names (what an OTLP exporter sends).
var ViewInstruments = []string{
	InstClaims,
	InstSlots,
	InstClaimsCreated,
	InstTimeToReady,
	InstAttempts,
	InstFailures,
	InstDeadlineMisses,
	InstShutdownAttempts,
	InstShutdownLimits,
	InstJoinsRefused,
	InstMachineUp,
	InstEnergy,
	InstCost,
}

// leaderOnlyExporter is an OTLP metric exporter that, like the scrape,
// sends the view metrics from the leader only.
type leaderOnlyExporter struct {
	sdkmetric.Exporter
	follows func() bool
}

func (e leaderOnlyExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if e.follows() {
		for i := range rm.ScopeMetrics {
			sm := &rm.ScopeMetrics[i]
			sm.Metrics = slices.DeleteFunc(sm.Metrics, func(m metricdata.Metrics) bool { return slices.Contains(ViewInstruments, m.Name) })
		}
	}
	return e.Exporter.Export(ctx, rm)
}
