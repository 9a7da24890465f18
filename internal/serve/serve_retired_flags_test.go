package serve

import (
	"bytes"
	"strings"
	"testing"
)

// A manifest that still sets the retired memory flags, in either form,
// keeps starting, and each use says it does nothing.
func TestServeAcceptsTheRetiredMemoryFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--serving-gc-percent", "50", "--release-code-pages"},
		{"--serving-gc-percent=0", "--release-code-pages=false"},
	} {
		f := newServe().Flags()
		var out bytes.Buffer
		f.SetOutput(&out)
		if err := f.Parse(args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if n := len(f.Args()); n != 0 {
			t.Fatalf("%q: %d arguments left over: %q", args, n, f.Args())
		}
		for _, name := range []string{"serving-gc-percent", "release-code-pages"} {
			if !strings.Contains(out.String(), "--"+name+" has been deprecated, it does nothing") {
				t.Errorf("%q: nothing says --%s does nothing; printed:\n%s", args, name, out.String())
			}
		}
	}
	// Hidden from the help: nobody should start using them.
	var help bytes.Buffer
	cmd := newServe()
	cmd.SetOut(&help)
	_ = cmd.Help()
	if strings.Contains(help.String(), "serving-gc-percent") || strings.Contains(help.String(), "release-code-pages") {
		t.Fatalf("serve's help lists a retired flag:\n%s", help.String())
	}
}
