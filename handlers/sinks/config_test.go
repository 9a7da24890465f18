package sinks_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/sinks"
)

func TestExampleSinksFileLoads(t *testing.T) {
	t.Setenv("CLAIMSTREAM_ALERTS_TOKEN", "s3cret")
	cfg, err := sinks.LoadConfig("../../deploy/examples/sinks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 2 {
		t.Fatalf("%d sinks", len(cfg.Sinks))
	}
	a := cfg.Sinks[0]
	if a.Name != "alerts" || a.Mode != sinks.ModeBinary || a.MaxAttempts != 5 || !a.DeadLetters() || a.Start != sinks.StartNew ||
		a.Backoff.Initial != time.Second || a.Backoff.Max != time.Minute || a.Headers["Authorization"] != "Bearer s3cret" {
		t.Fatalf("alerts sink %+v", a)
	}
	subj := a.FilterSubjects(events.Subjects{Prefix: "cs"})
	wantSubj := []string{"cs.slot.*.ClaimFailed", "cs.slot.*.ShutdownAttemptLimitReached", "cs.slot.*.HostJoinRefused"}
	if !slices.Equal(subj, wantSubj) {
		t.Fatalf("filters %v, want %v", subj, wantSubj)
	}
	if a.ConsumerName() != "sink-alerts" {
		t.Fatal(a.ConsumerName())
	}
	b := cfg.Sinks[1]
	if b.Mode != sinks.ModeStructured || b.DeadLetters() || b.Start != sinks.StartAll || b.Timeout != sinks.DefaultTimeout {
		t.Fatalf("audit sink %+v", b)
	}
}

func TestSinksFileErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"sinks: [{name: a, url: 'http://x', urll: 'http://y'}]", "field urll not found"},
		{"sink: []", "field sink not found"},
		{"sinks: [{name: a}]", "sinks[0] (a): url: required"},
		{"sinks: [{name: 'a b', url: 'http://x'}]", "sinks[0] (a b): name:"},
		{"sinks: [{name: a, url: 'ftp://x'}]", "url:"},
		{"sinks: [{name: a, url: 'http://x', types: [ClaimReady, Nope]}]", "types[1]: unknown event type \"Nope\""},
		{"sinks: [{name: a, url: 'http://x', mode: json}]", "mode:"},
		{"sinks: [{name: a, url: 'http://x', start: middle}]", "start:"},
		{"sinks: [{name: a, url: 'http://x', maxAttempts: -1}]", "maxAttempts:"},
		{"sinks: [{name: a, url: 'http://x', backoff: {initial: 1m, max: 1s}}]", "backoff.max:"},
		{"sinks: [{name: a, url: 'http://x', backoff: {initial: 5}}]", "time.Duration"},
		{"sinks: [{name: a, url: 'http://x'}, {name: a, url: 'http://y'}]", "sinks[1].name: \"a\" is also the name of sinks[0]"},
	} {
		_, err := sinks.ParseConfig([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", c.yaml, err, c.want)
		}
	}
	cfg, err := sinks.ParseConfig(nil)
	if err != nil || len(cfg.Sinks) != 0 {
		t.Fatalf("an empty file: %+v, %v", cfg, err)
	}
}
