package telemetry_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers/telemetry"
)

// TestBackupsOnTheScrapeEndpoint: backups are counted by result, and the
// time and size of the newest good one are gauges a failure leaves alone.
func TestBackupsOnTheScrapeEndpoint(t *testing.T) {
	tel := setup(t, telemetry.Options{Prometheus: true})
	at := time.Date(2026, 3, 4, 3, 17, 0, 0, time.UTC)
	tel.Metrics.BackupDone(at, 12345, nil)
	tel.Metrics.BackupDone(at.Add(time.Hour), 0, errors.New("the server ended the snapshot"))
	got := scrape(t, tel)
	for _, want := range []string{
		`claimstream_backups_total{result="ok"} 1` + "\n",
		`claimstream_backups_total{result="error"} 1` + "\n",
		"claimstream_backup_last_success_timestamp_seconds 1.77259422e+09\n",
		"claimstream_backup_last_size_bytes 12345\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the scrape has no %q:\n%s", want, grepLines(got, "claimstream_backup"))
		}
	}
}
