package serve

import (
	"strings"
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	day := 24 * time.Hour
	good := map[string]time.Duration{"400d": 400 * day, "0": 0, "0d": 0, "36h": 36 * time.Hour, " 7d ": 7 * day, "1h": time.Hour}
	for in, want := range good {
		got, err := parseRetention(in)
		if err != nil || got != want {
			t.Errorf("parseRetention(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	bad := map[string]string{"": "want a number of days", "400": "want a number of days", "-1d": "want a number of days", "d": "want a number of days", "400s": "shorter than 1h0m0s", "99999999d": "at most 36500d", "1.5d": "want a number of days"}
	for in, want := range bad {
		_, err := parseRetention(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseRetention(%q): %v, want an error saying %q", in, err, want)
		}
	}
}

func TestRetentionFlag(t *testing.T) {
	cmd := newServe()
	if err := cmd.Flags().Parse([]string{"--config", "x", "--retention", "30d"}); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("retention").Value.String(); got != "30d" {
		t.Fatalf("--retention 30d reads back %q", got)
	}
	if err := cmd.Flags().Parse([]string{"--retention", "5m"}); err == nil {
		t.Fatal("--retention 5m accepted")
	}
	if got := newServe().Flags().Lookup("retention").DefValue; got != "400d" {
		t.Fatalf("default retention %q, want 400d", got)
	}
}

func FuzzParseRetention(f *testing.F) {
	for _, s := range []string{"400d", "0", "36h", "1.5d", "-1d", "d", "99999999999999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseRetention(s)
		if err != nil {
			return
		}
		if d != 0 && d < minRetention {
			t.Fatalf("parseRetention(%q) = %s, below the minimum", s, d)
		}
		r := retention(d)
		back, err := parseRetention(r.String())
		if err != nil || back != d {
			t.Fatalf("%q -> %s -> %q -> %s, %v", s, d, r.String(), back, err)
		}
	})
}
