package telemetry

import (
	"context"
	"slices"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// capturingExporter keeps the names of what it was asked to export.
type capturingExporter struct {
	sdkmetric.Exporter
	names []string
}

func (c *capturingExporter) Export(_ context.Context, rm *metricdata.ResourceMetrics) error {
	c.names = c.names[:0]
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			c.names = append(c.names, m.Name)
		}
	}
	return nil
}

// Over OTLP as on the scrape, a follower sends no view metric and the
// leader sends them all; what is not a view metric goes either way.
func TestOTLPSendsViewMetricsFromTheLeaderOnly(t *testing.T) {
	batch := func() *metricdata.ResourceMetrics {
		var ms []metricdata.Metrics
		for _, n := range append(slices.Clone(ViewInstruments), InstLeaderEpoch, InstBackupLastSuccess) {
			ms = append(ms, metricdata.Metrics{Name: n})
		}
		return &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{Metrics: ms}}}
	}
	for _, follower := range []bool{true, false} {
		c := &capturingExporter{}
		e := leaderOnlyExporter{Exporter: c, follows: func() bool { return follower }}
		if err := e.Export(context.Background(), batch()); err != nil {
			t.Fatal(err)
		}
		for _, n := range ViewInstruments {
			if slices.Contains(c.names, n) == follower {
				t.Errorf("follower %t: %s sent %t", follower, n, !follower)
			}
		}
		if !slices.Contains(c.names, InstLeaderEpoch) || !slices.Contains(c.names, InstBackupLastSuccess) {
			t.Errorf("follower %t: sent %v, want the leadership and backup metrics too", follower, c.names)
		}
	}
}

// Every view family of the scrape has its instrument in ViewInstruments,
// so the two filters drop the same metrics.
func TestViewInstrumentsMatchTheScrapeFamilies(t *testing.T) {
	for _, f := range ViewFamilies {
		if !slices.ContainsFunc(ViewInstruments, func(i string) bool {
			return f == i || f == i+"_total" || f == i+"_seconds" || f == i+"_seconds_total" || f == i+"_joules_total"
		}) {
			t.Errorf("scrape family %s has no instrument in ViewInstruments", f)
		}
	}
	if len(ViewFamilies) != len(ViewInstruments) {
		t.Errorf("%d scrape families, %d instruments", len(ViewFamilies), len(ViewInstruments))
	}
}
