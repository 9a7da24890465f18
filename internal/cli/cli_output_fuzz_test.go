package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/provider/rest"
)

// FuzzViewsOutput: any -o value is either refused with an error naming -o,
// or prints (or fails with an -o jsonpath error) over a real list; it
// never panics.
func FuzzViewsOutput(f *testing.F) {
	for _, s := range []string{"table", "wide", "json", "yaml", "name", "jsonpath={.items[*].name}", "jsonpath=.seq",
		"jsonpath='{range .items[*]}{.name}{\"\\n\"}{end}'", "jsonpath={.items[?(@.phase==\"ready\")].name}", "jsonpath={", "xml", "jsonpath="} {
		f.Add(s, false)
	}
	v := views{Seq: 7, Claims: []rest.Claim{{}}}
	v.Claims[0].Name = "node-1.lan-abc123"
	f.Fuzz(func(t *testing.T, o string, noHeaders bool) {
		out, err := parseViewsOutput(o, noHeaders)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "-o") {
				t.Fatalf("-o %q: error %q does not name -o", o, err)
			}
			return
		}
		var b bytes.Buffer
		if err := printViews(&b, out, "claims", v, false, cliNow()); err != nil && !strings.HasPrefix(err.Error(), "-o jsonpath") {
			t.Fatalf("-o %q: %v", o, err)
		}
	})
}

// FuzzEventLine: any line the CLI reads from the event stream decodes or
// fails with an error; it never panics, and a decoded sequence is the
// number the line carries.
func FuzzEventLine(f *testing.F) {
	f.Add([]byte(`{"specversion":"1.0","id":"x","type":"dev.claimstream.ClaimFailed.v1","sequence":"12","time":"2026-03-04T09:13:11Z","data":{"claim":"c","slot":"s","group":"g","attempt":2,"cause":"why","reason":"DeadlineExceeded"}}`))
	f.Add([]byte(`{"sequence":"x"}`))
	f.Add([]byte(`{"type":"dev.claimstream.Nope.v1","data":[1]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e rest.Event
		if err := e.UnmarshalJSON(b); err != nil {
			return
		}
		if e.Sequence != "" && e.Seq == 0 && e.Sequence != "0" && strings.Trim(e.Sequence, "0") != "" {
			t.Fatalf("%q: sequence %q decoded as 0", b, e.Sequence)
		}
	})
}
