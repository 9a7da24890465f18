package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesAShortAPIToken: an admin or read-only token shorter
// than 32 characters, from a flag, a variable or a file, stops serve
// before it touches its data dir, saying how to make one; the generated
// token and one of 32 characters pass.
func TestServeRefusesAShortAPIToken(t *testing.T) {
	t.Setenv("CLAIMSTREAM_API_TOKEN", "")
	t.Setenv("CLAIMSTREAM_API_READ_TOKEN", "")
	strong := strings.Repeat("0123456789abcdef", 2)
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("0123456789abcdef0123456789abcde\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  string // CLAIMSTREAM_API_TOKEN
		o    serveOptions
		want string
	}{
		{name: "flag", o: serveOptions{apiToken: "hunter2"}, want: "--api-token is 7 characters long"},
		{name: "variable", env: "hunter2", want: "$CLAIMSTREAM_API_TOKEN is 7 characters long"},
		{name: "file", o: serveOptions{apiTokenFile: short}, want: "the API token in " + short + " is 31 characters long"},
		{name: "read-only flag", o: serveOptions{apiToken: strong, apiReadToken: readTokenFlags{token: "viewer"}}, want: "--api-read-token is 6 characters long"},
		{name: "read-only file", o: serveOptions{apiReadToken: readTokenFlags{file: short}}, want: "the read-only API token in " + short + " is 31 characters long"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CLAIMSTREAM_API_TOKEN", c.env)
			o := c.o
			o.config, o.dataDir, o.logLevel, o.apiAddress = examplePool, filepath.Join(t.TempDir(), "data"), "error", "127.0.0.1:0"
			err := runServe(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "openssl rand -hex 32") {
				t.Fatalf("serve: %v; want %q and how to generate a token", err, c.want)
			}
			if _, err := os.Stat(o.dataDir); !os.IsNotExist(err) {
				t.Errorf("the data dir was touched: %v", err)
			}
		})
	}
	if got, err := apiToken(serveOptions{apiToken: strong}); got != strong || err != nil {
		t.Errorf("a token of 32 characters: %q, %v", got, err)
	}
	generated, err := apiToken(serveOptions{dataDir: t.TempDir()})
	if err != nil || len(generated) < minAPITokenLength {
		t.Errorf("the generated token %q (%v) is shorter than %d", generated, err, minAPITokenLength)
	}
}
