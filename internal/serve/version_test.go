package serve

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/internal/buildinfo"
)

// The shape of `claimstream version`, against testdata/cli/version.golden.
func TestVersionGolden(t *testing.T) {
	var b bytes.Buffer
	if err := printVersion(&b, buildinfo.Info{Version: "v1.2.3", Revision: "0123456789abcdef", GoVersion: "go1.26.0"}); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "version", b.String())
}

// `claimstream version` and `claimstream --version` print the same build.
func TestVersionCommandAndFlagAgree(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		root := NewRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	cmd, flag := run("version"), run("--version")
	if cmd != flag {
		t.Fatalf("version:\n%s--version:\n%s", cmd, flag)
	}
	var want bytes.Buffer
	_ = printVersion(&want, buildinfo.Get())
	if cmd != want.String() {
		t.Fatalf("version printed\n%s\nwant\n%s", cmd, want.String())
	}
}

// `version -o json` is the build as an object with the build_info label
// names; an unknown -o is refused.
func TestVersionJSON(t *testing.T) {
	out := runCLI(t, nil, "version", "-o", "json")
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	in := buildinfo.Get()
	if got["version"] != in.Version || got["revision"] != in.Revision || got["goVersion"] != in.GoVersion || len(got) != 3 {
		t.Fatalf("version -o json: %v, want %+v", got, in)
	}
	if out := runCLI(t, nil, "version", "-o", "xml"); !strings.Contains(out, "error: -o xml: want text, json or yaml") {
		t.Fatalf("version -o xml: %s", out)
	}
}
