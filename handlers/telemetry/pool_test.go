package telemetry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/handlers/telemetry"
)

// TestPoolFileApplyOnTheScrapeEndpoint: the outcome of the last pool file
// apply is a gauge, and every failed apply is counted.
func TestPoolFileApplyOnTheScrapeEndpoint(t *testing.T) {
	tel := setup(t, telemetry.Options{Prometheus: true})
	for _, step := range []struct {
		reason string
		err    error
		want   []string
	}{
		{"", nil, []string{"claimstream_pool_file_applied 1\n", `claimstream_pool_file_apply_failures_total{reason="refused"} 0` + "\n"}},
		{telemetry.PoolFileRefused, errors.New("refused"), []string{"claimstream_pool_file_applied 0\n", `claimstream_pool_file_apply_failures_total{reason="refused"} 1` + "\n"}},
		{telemetry.PoolFileInvalid, errors.New("invalid"), []string{"claimstream_pool_file_applied 0\n", `claimstream_pool_file_apply_failures_total{reason="invalid"} 1` + "\n"}},
		{telemetry.PoolFileStopped, errors.New("stopped"), []string{"claimstream_pool_file_applied 0\n", `claimstream_pool_file_apply_failures_total{reason="stopped"} 1` + "\n", `claimstream_pool_file_apply_failures_total{reason="refused"} 1` + "\n"}},
		{"", nil, []string{"claimstream_pool_file_applied 1\n", `claimstream_pool_file_apply_failures_total{reason="refused"} 1` + "\n"}},
	} {
		tel.Metrics.PoolApplied(step.reason, step.err)
		got := scrape(t, tel)
		for _, want := range step.want {
			if !strings.Contains(got, want) {
				t.Errorf("after PoolApplied(%v) the scrape has no %q:\n%s", step.err, want, grepLines(got, "claimstream_pool"))
			}
		}
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
