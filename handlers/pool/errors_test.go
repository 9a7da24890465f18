package pool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file that is not a pool file (serve's API token file, a list, a
// kubeconfig-like map, a YAML syntax error) is refused by what kind of
// document it is, never with its content: --config pointed at a secret
// must not print it.
func TestNonPoolFileErrorsDoNotEchoTheFile(t *testing.T) {
	const secret = "5ec7e7c0ffee5ec7e7c0ffee5ec7e7c0ffee5ec7e7c0ffee"
	for _, c := range []struct{ name, content, want string }{
		{"api token file", secret + "\n", "f:1: the file is a single scalar, not a pool file"},
		{"quoted scalar", `"` + secret + `"`, "f:1: the file is a single scalar, not a pool file"},
		{"list", "- " + secret + "\n", "f:1: the file is a list, not a pool file"},
		{"map without pool fields", "token: " + secret + "\n" + secret + ": x\n", "f:1: the file is a map with neither groups nor slots, not a pool file"},
		{"unknown anchor", "*" + secret + "\n", "f:1: YAML syntax: an alias refers to an unknown anchor"},
		{"alias cycle", "&" + secret + " [*" + secret + "]\n", "f:1: the file is a list, not a pool file"},
	} {
		path := filepath.Join(t.TempDir(), "api-token")
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a ConfigError", c.name, err)
		}
		ce.Source = "f"
		if got := ce.Error(); strings.Contains(got, secret) || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q and not the file's content", c.name, got, c.want)
		}
	}
	// A pool file's own problems still show its values.
	_, err := Parse("f", []byte("groups: 5\nslots: []\n"))
	if err == nil || !strings.Contains(err.Error(), "groups: must be a list (got 5)") {
		t.Fatalf("a pool file's problem: %v", err)
	}
}
