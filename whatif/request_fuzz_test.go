package whatif_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/whatif"
)

// FuzzParseRequest: any body either parses to options that hold the
// request's rules (a period that is not empty, 1 to MaxCandidates named
// configs) or is refused with an error; it never panics.
func FuzzParseRequest(f *testing.F) {
	good, _ := json.Marshal(whatif.Request{Candidates: []whatif.RequestCandidate{{Name: "a.yaml", Pool: poolYAML("builtin", 2, 2, 0)}}})
	f.Add(good)
	f.Add([]byte(`{"from":"2026-11-01T00:00:00Z","to":"2026-11-08T00:00:00Z","seed":3,"candidates":[{"name":"a.yaml","pool":"groups: []\n"}]}`))
	f.Add([]byte(`{"from":"2026-11-08T00:00:00Z","to":"2026-11-01T00:00:00Z","candidates":[]}`))
	f.Add([]byte(`{"from":"x"}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		opts, err := whatif.ParseRequest(body)
		if err != nil {
			return
		}
		if !opts.To.After(opts.From) {
			t.Fatalf("accepted an empty period %s..%s", opts.From, opts.To)
		}
		if n := len(opts.Candidates); n == 0 || n > whatif.MaxCandidates {
			t.Fatalf("accepted %d candidates", n)
		}
		for _, c := range opts.Candidates {
			if c.Name == "" || c.Config == nil {
				t.Fatalf("accepted a candidate without a name or a config: %+v", c)
			}
		}
	})
}

func TestParseRequestRefusesBadBodies(t *testing.T) {
	pool := poolYAML("builtin", 2, 2, 0)
	body := func(v any) []byte { b, _ := json.Marshal(v); return b }
	for name, c := range map[string]struct {
		body []byte
		want string
	}{
		"unknown field": {[]byte(`{"from":"2026-11-01T00:00:00Z","to":"2026-11-02T00:00:00Z","candidates":[{"name":"a","pool":""}],"x":1}`), "unknown field"},
		"no period":     {body(map[string]any{"candidates": []any{map[string]string{"name": "a", "pool": pool}}}), "from and to are required"},
		"reversed":      {[]byte(`{"from":"2026-11-02T00:00:00Z","to":"2026-11-01T00:00:00Z","candidates":[]}`), "the period is empty"},
		"no candidates": {[]byte(`{"from":"2026-11-01T00:00:00Z","to":"2026-11-02T00:00:00Z","candidates":[]}`), "at least one pool file"},
		"unnamed":       {body(map[string]any{"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z", "candidates": []any{map[string]string{"pool": pool}}}), "name is required"},
		"bad pool":      {body(map[string]any{"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z", "candidates": []any{map[string]string{"name": "bad.yaml", "pool": "groups: [{name: g, minSize: -1}]"}}}), "candidates[0]: bad.yaml"},
		"two documents": {[]byte(`{"from":"2026-11-01T00:00:00Z"} {}`), "more than one JSON value"},
		"not JSON":      {[]byte(`groups: []`), "request body"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := whatif.ParseRequest(c.body)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
