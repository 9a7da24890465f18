package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The read-only token comes from its flag, its variable or its file; an
// empty file and a token equal to the admin one stop serve, saying why.
func TestReadTokenSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "read-token")
	if err := os.WriteFile(file, []byte(" viewer-token \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLAIMSTREAM_API_READ_TOKEN", "")
	for _, c := range []struct {
		flags         readTokenFlags
		want, wantErr string
	}{
		{readTokenFlags{}, "", ""},
		{readTokenFlags{token: "flag-token"}, "flag-token", ""},
		{readTokenFlags{file: file}, "viewer-token", ""},
		{readTokenFlags{file: empty}, "", "is empty"},
		{readTokenFlags{file: filepath.Join(dir, "nope")}, "", "--api-read-token-file"},
		{readTokenFlags{token: "admin"}, "", "is the admin token"},
	} {
		got, err := c.flags.resolve("admin")
		if got != c.want || (c.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%+v: %q, %v; want %q, error %q", c.flags, got, err, c.want, c.wantErr)
		}
	}
	t.Setenv("CLAIMSTREAM_API_READ_TOKEN", "env-token")
	if got, err := (&readTokenFlags{file: file}).resolve("admin"); got != "env-token" || err != nil {
		t.Errorf("the variable: %q, %v", got, err)
	}
}
