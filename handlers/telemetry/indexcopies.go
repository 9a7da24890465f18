package telemetry

import (
	"context"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// claimstream_index_copy_saves_total{index=cost|timeline,outcome=saved|failed}:
// the saved copies of serve's in-memory indexes (the cost index, the
// dashboard's timeline index) written beside the checkpoints. A failed save
// loses nothing (the index stays in memory, the log has every event), but
// the next start folds more of the log; failures that go on (a full or
// unwritable disk) mean slower starts.
const InstIndexCopySaves = "claimstream_index_copy_saves"

const (
	scrapeIndexCopySaves = InstIndexCopySaves + "_total"
	descIndexCopySaves   = "Saves of the in-memory indexes' copies beside the checkpoints, by index and outcome (failed: the next start folds more of the log)."
)

// indexCopySeries are the label sets the scrape shows from the start.
var indexCopySeries = []map[string]string{
	{"index": "cost", "outcome": "saved"},
	{"index": "cost", "outcome": "failed"},
	{"index": "timeline", "outcome": "saved"},
	{"index": "timeline", "outcome": "failed"},
}

func (m *Metrics) newIndexCopyInstruments(meter metric.Meter) error {
	var err error
	m.indexCopySaves, err = meter.Int64Counter(InstIndexCopySaves, metric.WithDescription(descIndexCopySaves))
	return err
}

// IndexCopySave counts one save of an index's copy by index (cost,
// timeline) and outcome (saved, failed).
func (m *Metrics) IndexCopySave(index, outcome string) {
	m.indexCopySaves.Add(context.Background(), 1, metric.WithAttributes(attribute.String("index", index), attribute.String("outcome", outcome)))
}

// indexCopyZeros is the counter's entry in the scrape's zeros (atzero.go).
func indexCopyZeros() zeroFamily {
	return zeroFamily{scrapeIndexCopySaves, descIndexCopySaves, dto.MetricType_COUNTER, nil, indexCopySeries}
}
