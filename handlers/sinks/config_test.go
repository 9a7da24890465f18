package sinks_test

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

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
		{"sinks: [{name: a, url: 'http://x', urll: 'http://y'}]", "sinks file:1: sinks[0].urll: unknown field (a sink has backoff, deadLetter,"},
		{"sink: []", "sinks file:1: sink: unknown field (the file has one: sinks)"},
		{"sinks: [{name: a}]", "sinks file:1: sinks[0].url: required"},
		{"sinks: [{name: 'a b', url: 'http://x'}]", "sinks[0].name: \"a b\" must be only"},
		{"sinks: [{name: a, url: 'ftp://x'}]", "sinks[0].url: \"ftp://x\" is not an http(s) URL"},
		{"sinks: [{name: a, url: 'http://x', types: [ClaimReady, Nope]}]", "sinks[0].types[1]: unknown event type \"Nope\""},
		{"sinks: [{name: a, url: 'http://x', mode: json}]", "sinks[0].mode: \"json\", want binary or structured"},
		{"sinks: [{name: a, url: 'http://x', start: middle}]", "sinks[0].start:"},
		{"sinks: [{name: a, url: 'http://x', maxAttempts: -1}]", "sinks[0].maxAttempts: -1 is negative"},
		{"sinks: [{name: a, url: 'http://x', maxAttempts: many}]", "sinks[0].maxAttempts: want a whole number, got \"many\""},
		{"sinks: [{name: a, url: 'http://x', backoff: {initial: 1m, max: 1s}}]", "sinks[0].backoff.max: 1s is below backoff.initial 1m0s"},
		{"sinks: [{name: a, url: 'http://x', backoff: {initial: 5}}]", "sinks[0].backoff.initial: want a duration such as 1s, got \"5\""},
		{"sinks: [{name: a, url: 'http://x'}, {name: a, url: 'http://y'}]", "sinks[1].name: \"a\" is also the name of sinks[0]"},
		{"sinks: {name: a}", "sinks file:1: sinks: want a list of sinks, got a map"},
		{"sinks: [{name: a, url: [1]}]", "sinks[0].url: want a string, got a list"},
		{"sinks: [", "sinks file:1: not YAML:"},
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

// TestSinksFileReportsEveryProblem: a file with several problems reports
// each with its line and the field as the file names it, in line order,
// with no Go type name; nothing is returned.
func TestSinksFileReportsEveryProblem(t *testing.T) {
	file := `sinks:
  - name: alerts
    url: ftp://x
    types: [ClaimFailed, Bogus]
    timeout: soon
  - name: alerts
    url: http://ok
    mode: json
    backoff:
      initial: 1m
      max: 1s
      jitter: 2s
    deadLetter: maybe
`
	cfg, err := sinks.ParseConfig([]byte(file))
	want := []string{
		`sinks file:3: sinks[0].url: "ftp://x" is not an http(s) URL`,
		`sinks file:4: sinks[0].types[1]: unknown event type "Bogus" (docs/events.md lists them)`,
		`sinks file:5: sinks[0].timeout: want a duration such as 10s, got "soon"`,
		`sinks file:6: sinks[1].name: "alerts" is also the name of sinks[0]`,
		`sinks file:8: sinks[1].mode: "json", want binary or structured`,
		`sinks file:11: sinks[1].backoff.max: 1s is below backoff.initial 1m0s`,
		`sinks file:12: sinks[1].backoff.jitter: unknown field (backoff has initial and max)`,
		`sinks file:13: sinks[1].deadLetter: want true or false, got "maybe"`,
	}
	var ce *sinks.ConfigError
	if !errors.As(err, &ce) || len(cfg.Sinks) != 0 {
		t.Fatalf("got %+v, %v; want a ConfigError and no sinks", cfg, err)
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if strings.Contains(err.Error(), "time.Duration") || strings.Contains(err.Error(), "unmarshal") {
		t.Fatalf("a Go type name in the problems: %s", err)
	}
}

// FuzzSinksFile: any input is either a valid config whose every sink
// passes validation again, or a ConfigError naming at least one problem
// with a line; it never panics. An accepted file's headers are tokens,
// not reserved, with values free of CR, LF and NUL, and they round-trip:
// written back as {value: ...} they load to the same headers. valueFrom
// reads a fake environment and fake files only.
func FuzzSinksFile(f *testing.F) {
	env := map[string]string{"TOKEN": "t0ken", "CRLF": "a\r\nb", "EMPTY": ""}
	files := map[string]string{"/run/tok": "f1le\n", "/run/lf": "a\nb", "/run/empty": ""}
	f.Add([]byte("sinks:\n  - {name: a, url: 'http://x', types: [ClaimFailed], backoff: {initial: 1s, max: 2s}}\n"))
	f.Add([]byte("sinks: [{name: a, url: [1], timeout: x, maxAttempts: 1.5, headers: {a: b}}]"))
	f.Add([]byte("sinks: [{name: a, url: 'http://x', headers: {A: {prefix: 'Bearer ', valueFrom: {env: TOKEN}}, B: {valueFrom: {file: /run/tok}}, C: {value: '$X'}, D: abc$def}}]"))
	f.Add([]byte("sinks: [{name: a, url: 'http://x', headers: {A: {valueFrom: {env: CRLF}}, B: {valueFrom: {file: /run/lf}}, Ce-Id: x, \"X\\r\": \"a\\nb\"}}]"))
	f.Add([]byte("sinks: [{name: a, url: 'http://x', headers: {A: '${TOKEN}', b: {valueFrom: {env: EMPTY}}, B: 1}}]"))
	f.Add([]byte("sinks: &a [*a]"))
	f.Add([]byte("- 1\n- 2"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := sinks.ParseConfigWith(b, env, files)
		if err != nil {
			var ce *sinks.ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("%q: error %v is not a ConfigError with problems", b, err)
			}
			if len(cfg.Sinks) != 0 {
				t.Fatalf("%q: sinks returned with an error", b)
			}
			return
		}
		for _, s := range cfg.Sinks {
			if s.Name == "" || s.URL == "" || s.MaxAttempts <= 0 || s.Timeout <= 0 {
				t.Fatalf("%q: a valid sink without its defaults: %+v", b, s)
			}
			for k, v := range s.Headers {
				if k == "" || strings.ContainsAny(k, " :\r\n\x00") || strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("%q: header %q: %q accepted", b, k, v)
				}
				if c := http.CanonicalHeaderKey(k); strings.HasPrefix(c, "Ce-") || c == "Host" || c == "Content-Type" || c == "Traceparent" {
					t.Fatalf("%q: reserved header %q accepted", b, k)
				}
			}
			if len(s.Headers) == 0 {
				continue
			}
			hs := map[string]any{}
			for k, v := range s.Headers {
				hs[k] = map[string]string{"value": v}
			}
			again, err := yaml.Marshal(map[string]any{"sinks": []any{map[string]any{"name": s.Name, "url": s.URL, "headers": hs}}})
			if err != nil {
				t.Fatal(err)
			}
			back, err := sinks.ParseConfigWith(again, nil, nil)
			if err != nil {
				t.Fatalf("%q: its headers written back do not load: %v\n%s", b, err, again)
			}
			if !maps.Equal(back.Sinks[0].Headers, s.Headers) {
				t.Fatalf("%q: headers %q written back load as %q", b, s.Headers, back.Sinks[0].Headers)
			}
		}
	})
}
