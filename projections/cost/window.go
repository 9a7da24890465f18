package cost

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is the period a report covers, [Since, Until).
type Window struct {
	Since time.Time
	Until time.Time
}

// ParseWindow reads the period of a report from operator input: month
// ("2026-11", the calendar month in UTC) alone, or since and until, each
// RFC 3339 or a duration before now ("7d", "36h", "90m"; d is 24h). An
// empty until is now; an empty since is 30 days before until.
func ParseWindow(since, until, month string, now time.Time) (Window, error) {
	now = now.UTC()
	if month != "" {
		if since != "" || until != "" {
			return Window{}, fmt.Errorf("month %q: give either a month or since/until, not both", month)
		}
		m, err := time.Parse("2006-01", month)
		if err != nil {
			return Window{}, fmt.Errorf("month %q: must be YYYY-MM such as 2026-11", month)
		}
		return Window{Since: m, Until: m.AddDate(0, 1, 0)}, nil
	}
	w := Window{Until: now}
	var err error
	if until != "" {
		if w.Until, err = instant(until, now); err != nil {
			return Window{}, fmt.Errorf("until: %w", err)
		}
	}
	w.Since = w.Until.AddDate(0, 0, -30)
	if since != "" {
		if w.Since, err = instant(since, now); err != nil {
			return Window{}, fmt.Errorf("since: %w", err)
		}
	}
	if !w.Since.Before(w.Until) {
		return Window{}, fmt.Errorf("since %s is not before until %s", w.Since.Format(time.RFC3339), w.Until.Format(time.RFC3339))
	}
	return w, nil
}

// maxRelative bounds a relative instant (about 100 years): a larger one
// is a typo, and would overflow a time.Duration.
const maxRelative = 100 * 365 * 24 * time.Hour

// instant reads an RFC 3339 time or a duration before now.
func instant(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 32)
		if err != nil || time.Duration(n) > maxRelative/(24*time.Hour) {
			return time.Time{}, fmt.Errorf("%q: must be RFC 3339 (2026-11-01T00:00:00Z) or a duration before now (7d, 36h, 90m)", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d < 0 || d > maxRelative {
			return time.Time{}, fmt.Errorf("%q: must be RFC 3339 (2026-11-01T00:00:00Z) or a duration before now (7d, 36h, 90m)", s)
		}
	}
	return now.Add(-d), nil
}
