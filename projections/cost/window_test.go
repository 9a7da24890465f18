package cost

import (
	"strings"
	"testing"
	"time"
)

func TestParseWindow(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		since, until, month string
		want                Window
		err                 string
	}{
		{month: "2026-11", want: Window{time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}},
		{month: "2026-12", want: Window{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{since: "7d", want: Window{now.AddDate(0, 0, -7), now}},
		{since: "36h", until: "12h", want: Window{now.Add(-36 * time.Hour), now.Add(-12 * time.Hour)}},
		{since: "2026-11-01T00:00:00Z", until: "2026-11-02T00:00:00+01:00", want: Window{time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 23, 0, 0, 0, time.UTC)}},
		{want: Window{now.AddDate(0, 0, -30), now}},
		{month: "2026-13", err: "must be YYYY-MM"},
		{month: "2026-11", since: "7d", err: "not both"},
		{since: "yesterday", err: "must be RFC 3339"},
		{since: "-5h", err: "must be RFC 3339"},
		{since: "99999999d", err: "must be RFC 3339"},
		{since: "1h", until: "2h", err: "is not before"},
	} {
		got, err := ParseWindow(tc.since, tc.until, tc.month, now)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: err %v, want %q", tc, err, tc.err)
			}
			continue
		}
		if err != nil || !got.Since.Equal(tc.want.Since) || !got.Until.Equal(tc.want.Until) {
			t.Errorf("%+v: %v %v, want %v", tc, got, err, tc.want)
		}
	}
}

func TestParseDimension(t *testing.T) {
	if d, err := ParseDimension("requester"); err != nil || d != ByRequester {
		t.Fatal(d, err)
	}
	if _, err := ParseDimension("team"); err == nil || !strings.Contains(err.Error(), "group, slot, requester, claim") {
		t.Fatal(err)
	}
}

// FuzzParseWindow: operator input never panics, and a window it accepts is
// a non-empty period.
func FuzzParseWindow(f *testing.F) {
	for _, s := range [][3]string{{"7d", "", ""}, {"", "", "2026-11"}, {"2026-11-01T00:00:00Z", "1h", ""}, {"9223372036854775807ns", "", ""}} {
		f.Add(s[0], s[1], s[2])
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, since, until, month string) {
		w, err := ParseWindow(since, until, month, now)
		if err == nil && !w.Since.Before(w.Until) {
			t.Fatalf("accepted an empty window %v", w)
		}
	})
}
