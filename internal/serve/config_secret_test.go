package serve

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// --config (and config validate) pointed at serve's own API token file is
// refused without printing the token.
func TestPoolFileErrorDoesNotPrintTheAPIToken(t *testing.T) {
	dir := t.TempDir()
	token, err := apiToken(serveOptions{dataDir: dir})
	if err != nil || token == "" {
		t.Fatalf("token %q, %v", token, err)
	}
	path := filepath.Join(dir, apiTokenFile)
	err = runServe(context.Background(), serveOptions{config: path, dataDir: t.TempDir(), logLevel: "warn", plaintext: true})
	if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "not a pool file") {
		t.Fatalf("serve --config %s: %v; want a refusal without the token", path, err)
	}
	root := NewRoot()
	root.SetArgs([]string{"config", "validate", path})
	err = root.Execute()
	if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "the file is a single scalar, not a pool file") {
		t.Fatalf("config validate %s: %v; want a refusal without the token", path, err)
	}
}
