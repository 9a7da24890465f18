package telemetry

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instruments of the online backup (GET /api/v1/backup).
const (
	// claimstream_backups_total{result=ok|error}: backups served.
	InstBackups = "claimstream_backups"
	// claimstream_backup_last_success_timestamp_seconds: when the newest
	// good backup was sent (alert when it grows old).
	InstBackupLastSuccess = "claimstream_backup_last_success_timestamp"
	// claimstream_backup_last_size_bytes: the snapshot bytes of that backup.
	InstBackupLastSize = "claimstream_backup_last_size"
)

type backupInstruments struct {
	count       metric.Int64Counter
	lastSuccess metric.Float64Gauge
	lastSize    metric.Int64Gauge
}

func newBackupInstruments(meter metric.Meter) (backupInstruments, error) {
	var b backupInstruments
	var err1, err2, err3 error
	b.count, err1 = meter.Int64Counter(InstBackups, metric.WithDescription("Backups of the log served, by result."))
	b.lastSuccess, err2 = meter.Float64Gauge(InstBackupLastSuccess, metric.WithUnit("s"),
		metric.WithDescription("Unix time the newest good backup of the log was sent."))
	b.lastSize, err3 = meter.Int64Gauge(InstBackupLastSize, metric.WithUnit("By"),
		metric.WithDescription("Snapshot bytes of the newest good backup of the log."))
	return b, errors.Join(err1, err2, err3)
}

// BackupDone records one backup served: at is when it ended, size its
// snapshot bytes, err why it failed.
func (m *Metrics) BackupDone(at time.Time, size int64, err error) {
	ctx := context.Background()
	if err != nil {
		m.backup.count.Add(ctx, 1, metric.WithAttributes(attribute.String("result", "error")))
		return
	}
	m.backup.count.Add(ctx, 1, metric.WithAttributes(attribute.String("result", "ok")))
	m.backup.lastSuccess.Record(ctx, float64(at.UnixNano())/1e9)
	m.backup.lastSize.Record(ctx, size)
}
