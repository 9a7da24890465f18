package telemetry

import (
	"context"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstream/claimstream/events"
)

// claimstream_power_readings_total{driver,outcome}: readings of Node-less
// slots' power drivers (handlers.PowerWatch): on, off, unknown (the
// driver cannot tell), failed (unreachable, refused credentials, a Secret
// serve may not read).
const InstPowerReadings = "claimstream_power_readings"

const descPowerReadings = "Readings of a Node-less slot's power driver by outcome: on, off, unknown, failed (unreachable, wrong credentials, a Secret serve may not read)."

// PowerDrivers and PowerReadingOutcomes are the label values on the
// scrape at 0 from the start.
var (
	PowerDrivers         = []string{events.PowerWoL, events.PowerIPMI, events.PowerRedfish, events.PowerLibvirt, events.PowerProxmox}
	PowerReadingOutcomes = []string{"on", "off", "unknown", "failed"}
)

func (m *Metrics) newPowerInstruments(meter metric.Meter) error {
	var err error
	m.powerReadings, err = meter.Int64Counter(InstPowerReadings, metric.WithDescription(descPowerReadings))
	return err
}

// PowerRead counts one reading of a power driver (handlers.PowerMetrics).
func (m *Metrics) PowerRead(driver, outcome string) {
	m.powerReadings.Add(context.Background(), 1, metric.WithAttributes(attribute.String("driver", driver), attribute.String("outcome", outcome)))
}

func powerZeros() zeroFamily {
	var labels []map[string]string
	for _, d := range PowerDrivers {
		for _, o := range PowerReadingOutcomes {
			labels = append(labels, map[string]string{"driver": d, "outcome": o})
		}
	}
	return zeroFamily{scrapePowerReadings, descPowerReadings, dto.MetricType_COUNTER, nil, labels}
}
