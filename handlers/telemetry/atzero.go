package telemetry

import (
	"slices"
	"sort"
	"strings"

	promclient "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// The scrape shows every counter and histogram at zero from the start: for
// each group in the views (the pool file's, and a group added later from
// its first scrape on) and each value of a label the code knows (a failure
// reason, an outcome). Without it a series appears only with its first
// event, and an alert such as increase(...[15m]) > 0 never sees the first
// failure of its kind (it has no earlier sample to rise from).
//
// The OpenTelemetry API cannot make a histogram series without a
// measurement, so the zeros are added to what the exporter gathers: a
// series the exporter has is left alone; a missing one is added with
// count, sum and every bucket at 0.

// Scrape names (the exporter's, with the unit and _total suffixes).
const (
	scrapeTimeToReady    = InstTimeToReady + "_seconds"
	scrapeAttempts       = InstAttempts
	scrapeFailures       = InstFailures + "_total"
	scrapeDeadlineMisses = InstDeadlineMisses + "_total"
	scrapeShutdowns      = InstShutdownAttempts + "_total"
	scrapeShutdownLimits = InstShutdownLimits + "_total"
	scrapeJoinsRefused   = InstJoinsRefused + "_total"
	scrapeClaimsCreated  = InstClaimsCreated + "_total"
	scrapeAppend         = InstAppendDuration + "_seconds"
	scrapeWork           = InstWorkDuration + "_seconds"
	scrapeReaction       = InstReaction + "_seconds"
	scrapeBackups        = InstBackups + "_total"
	scrapeTLSReloads     = "claimstream_tls_certificate_reload_failures_total"
	scrapePoolFailures   = InstPoolApplyFailures + "_total"
	scrapeKubeFailures   = InstKubeWriteFailures + "_total"
	scrapePowerReadings  = InstPowerReadings + "_total"
	scrapeLogFailures    = InstLogWriteFailures + "_total"
	scrapeSinkFailures   = InstSinkFailures + "_total"
	scrapeSinkDelivered  = InstSinkDeliveries + "_total"
	scrapeSinkDead       = InstSinkDeadLetters + "_total"
)

// Bucket boundaries, shared by the instruments and their zeros.
var (
	timeToReadyBounds = []float64{15, 30, 60, 90, 120, 180, 240, 300, 420, 600, 900, 1200, 1800}
	attemptBounds     = []float64{1, 2, 3, 4}
	appendBounds      = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	latencyBounds     = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// zeroFamily is one metric the scrape shows at zero: its help (the
// instrument's description: a test keeps them equal), its type, its
// buckets (histograms) and the label sets it must have.
type zeroFamily struct {
	name   string
	help   string
	typ    dto.MetricType
	bounds []float64
	series []map[string]string
}

// requesterOf is the kind of caller that creates a group's claims: the
// built-in scaler for a builtin group, else cluster-autoscaler.
func requesterOf(g *projections.Group) string {
	if g.Spec.Scaler == events.ScalerBuiltin {
		return RequesterBuiltin
	}
	return RequesterClusterAutoscaler
}

// zeroFamilies lists what must be on the scrape for the groups in the views.
func (m *Metrics) zeroFamilies() []zeroFamily {
	var groups []*projections.Group
	if v := m.views.Load(); v != nil {
		v.Read(func(s *projections.State) {
			for _, g := range s.Groups {
				if !g.Retired {
					groups = append(groups, g)
				}
			}
		})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	var sinks []string
	if p := m.sinkNames.Load(); p != nil {
		sinks = *p
	}
	perGroup := func(extra func(g *projections.Group) []map[string]string) []map[string]string {
		var out []map[string]string
		for _, g := range groups {
			if extra == nil {
				out = append(out, map[string]string{"group": g.Name})
				continue
			}
			for _, l := range extra(g) {
				l["group"] = g.Name
				out = append(out, l)
			}
		}
		return out
	}
	each := func(key string, values ...string) func(*projections.Group) []map[string]string {
		return func(*projections.Group) []map[string]string {
			out := make([]map[string]string, 0, len(values))
			for _, v := range values {
				out = append(out, map[string]string{key: v})
			}
			return out
		}
	}
	labelled := func(key string, values ...string) []map[string]string { return each(key, values...)(nil) }
	counter, histogram := dto.MetricType_COUNTER, dto.MetricType_HISTOGRAM
	var work []map[string]string
	for _, w := range []string{"slot", "scaler", "strays"} {
		for _, o := range []string{"ok", "error"} {
			work = append(work, map[string]string{"work": w, "outcome": o})
		}
	}
	return []zeroFamily{
		{scrapeTimeToReady, descTimeToReady, histogram, timeToReadyBounds, perGroup(nil)},
		{scrapeAttempts, descAttempts, histogram, attemptBounds, perGroup(nil)},
		{scrapeFailures, descFailures, counter, nil, perGroup(each("reason", projections.FailureReasons...))},
		{scrapeDeadlineMisses, descDeadlineMisses, counter, nil, perGroup(nil)},
		{scrapeShutdowns, descShutdowns, counter, nil, perGroup(each("force", "false", "true"))},
		{scrapeShutdownLimits, descShutdownLimits, counter, nil, perGroup(nil)},
		{scrapeJoinsRefused, descJoinsRefused, counter, nil, perGroup(nil)},
		{scrapeClaimsCreated, descClaimsCreated, counter, nil, perGroup(func(g *projections.Group) []map[string]string {
			return []map[string]string{{"requester": requesterOf(g)}}
		})},
		{scrapeAppend, descAppend, histogram, appendBounds, labelled("outcome", "ok", "conflict", "error")},
		{scrapeWork, descWork, histogram, latencyBounds, work},
		{scrapeReaction, descReaction, histogram, latencyBounds, []map[string]string{{}}},
		{scrapeBackups, descBackups, counter, nil, labelled("result", "ok", "error")},
		{scrapeTLSReloads, descTLSReloads, counter, nil, labelled("server", "provider", "api")},
		{scrapePoolFailures, descPoolFailures, counter, nil, labelled("reason", PoolFileReasons...)},
		{scrapeKubeFailures, descKubeWriteFailures, counter, nil, labelled("what", "event", "status")},
		{scrapeLogFailures, descLogFailures, counter, nil, labelled("reason", eventlog.WriteFailureUnwritable, eventlog.WriteFailureNoSpace, eventlog.WriteFailureNoResponse, eventlog.WriteFailureJetStream, eventlog.WriteFailureOther)},
		{scrapeSinkFailures, descSinkFailures, counter, nil, labelled("sink", sinks...)},
		{scrapeSinkDelivered, descSinkDelivered, counter, nil, labelled("sink", sinks...)},
		{scrapeSinkDead, descSinkDead, counter, nil, labelled("sink", sinks...)},
		authZeros(),
		powerZeros(),
	}
}

// KnownSinks names the webhook sinks of the sinks file, whose counters the
// scrape shows at zero from the start.
func (m *Metrics) KnownSinks(names []string) {
	names = slices.Clone(names)
	m.sinkNames.Store(&names)
}

// zeroFilled gathers from the exporter's registry and adds the missing
// zeros.
type zeroFilled struct {
	promclient.Gatherer
	m *Metrics
}

func (z zeroFilled) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := z.Gatherer.Gather()
	if err != nil {
		return mfs, err
	}
	byName := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	for _, zf := range z.m.zeroFamilies() {
		if len(zf.series) == 0 {
			continue
		}
		mf := byName[zf.name]
		if mf == nil {
			mf = &dto.MetricFamily{Name: proto.String(zf.name), Help: proto.String(zf.help), Type: zf.typ.Enum()}
			byName[zf.name] = mf
			mfs = append(mfs, mf)
		}
		if mf.GetType() != zf.typ {
			continue // not ours to fill (a renamed instrument): leave it
		}
		have := map[string]bool{}
		for _, met := range mf.Metric {
			have[labelKey(met.Label)] = true
		}
		added := false
		for _, labels := range zf.series {
			pairs := labelPairs(labels)
			if have[labelKey(pairs)] {
				continue
			}
			met := &dto.Metric{Label: pairs}
			if zf.typ == dto.MetricType_HISTOGRAM {
				h := &dto.Histogram{SampleCount: proto.Uint64(0), SampleSum: proto.Float64(0)}
				for _, b := range zf.bounds {
					h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(0)})
				}
				met.Histogram = h
			} else {
				met.Counter = &dto.Counter{Value: proto.Float64(0)}
			}
			mf.Metric = append(mf.Metric, met)
			added = true
		}
		if added {
			sort.Slice(mf.Metric, func(i, j int) bool { return labelKey(mf.Metric[i].Label) < labelKey(mf.Metric[j].Label) })
		}
	}
	sort.Slice(mfs, func(i, j int) bool { return mfs[i].GetName() < mfs[j].GetName() })
	return z.m.leaderOnly(mfs), nil
}

func labelPairs(labels map[string]string) []*dto.LabelPair {
	out := make([]*dto.LabelPair, 0, len(labels))
	for k, v := range labels {
		out = append(out, &dto.LabelPair{Name: proto.String(k), Value: proto.String(v)})
	}
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// labelKey identifies a label set whatever the order of its pairs.
func labelKey(pairs []*dto.LabelPair) string {
	parts := make([]string, 0, len(pairs))
	for _, p := range pairs {
		parts = append(parts, p.GetName()+"\x00"+p.GetValue())
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x01")
}
