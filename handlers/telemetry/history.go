package telemetry

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/internal/chunkfile"
)

// claimstream_index_history_bytes{index,held}: an index's history (the
// cost index's spans, the timeline index's event instants) on disk
// (held="disk") and held in memory because the disk refused it
// (held="memory": above 0 only then; /readyz says why).
const InstIndexHistory = "claimstream_index_history"

// IndexHistory is an index that says where it holds its history.
type IndexHistory interface {
	History() chunkfile.Usage
}

type historyInstruments struct {
	mu      sync.Mutex
	indexes map[string]IndexHistory
}

// ObserveIndexHistory reports where index holds its history at every
// scrape.
func (m *Metrics) ObserveIndexHistory(index string, h IndexHistory) {
	m.history.mu.Lock()
	defer m.history.mu.Unlock()
	if m.history.indexes == nil {
		m.history.indexes = map[string]IndexHistory{}
	}
	m.history.indexes[index] = h
}

// registerIndexHistory creates the history gauge and its callback.
func (m *Metrics) registerIndexHistory() error {
	bytes, err := m.meter.Int64ObservableGauge(InstIndexHistory, metric.WithUnit("By"),
		metric.WithDescription("An index's history on disk (held=disk) and in memory because the disk refused it (held=memory)."))
	if err != nil {
		return fmt.Errorf("instrument %s: %w", InstIndexHistory, err)
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		m.history.mu.Lock()
		defer m.history.mu.Unlock()
		for index, h := range m.history.indexes {
			u := h.History()
			o.ObserveInt64(bytes, u.OnDisk, metric.WithAttributes(attribute.String("index", index), attribute.String("held", "disk")))
			o.ObserveInt64(bytes, u.InMemory, metric.WithAttributes(attribute.String("index", index), attribute.String("held", "memory")))
		}
		return nil
	}, bytes)
	if err != nil {
		return fmt.Errorf("index history metrics: %w", err)
	}
	return nil
}
