package serve

import (
	"context"
	"os"
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

// A start killed while it wrote the generated token left a temporary file
// holding a token; the next start, generating the token again, removes
// it and keeps only the token file.
func TestAGeneratedTokenRemovesAKilledStartsTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "."+apiTokenFile+"-4151")
	if err := os.WriteFile(stale, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, ".api-tokens-kept")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	token, err := apiToken(serveOptions{dataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if names := listDir(t, dir); names != ".api-tokens-kept,api-token" {
		t.Fatalf("the data dir holds %q, want the token file and the unrelated file only", names)
	}
	if b, err := os.ReadFile(filepath.Join(dir, apiTokenFile)); err != nil || strings.TrimSpace(string(b)) != token {
		t.Fatalf("token file %q, %v; want the token served", b, err)
	}
}
