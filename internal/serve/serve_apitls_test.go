package serve

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
)

// TestServeAPIOverTLS: with --api-tls-cert/--api-tls-key the REST API is
// HTTPS; the CLI reaches it with --ca-file (or --insecure-skip-verify),
// and refuses a certificate it cannot verify.
func TestServeAPIOverTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t)
	apiAddr := freeAddr(t)
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		apiAddress: apiAddr, apiToken: "tok-0123456789abcdef0123456789abcdef", apiTLSCert: certFile, apiTLSKey: keyFile}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := NewRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "--token", o.apiToken, "--cli-config", ""))
		err := root.Execute()
		return out.String(), err
	}
	eventstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		out, err := cli("get", "groups", "--server", "https://"+apiAddr, "--ca-file", certFile)
		if err == nil && !strings.Contains(out, "homelab") {
			return errors.New("the pool is not applied yet")
		}
		return err
	})
	if out, err := cli("get", "groups", "--server", "https://"+apiAddr, "--ca-file", certFile); err != nil || !strings.Contains(out, "homelab") {
		t.Fatalf("with --ca-file: %v\n%s", err, out)
	}
	if out, err := cli("get", "groups", "--server", "https://"+apiAddr, "--insecure-skip-verify"); err != nil || !strings.Contains(out, "homelab") {
		t.Fatalf("with --insecure-skip-verify: %v\n%s", err, out)
	}
	if _, err := cli("get", "groups", "--server", "https://"+apiAddr); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unverifiable certificate: %v, want an error about the certificate", err)
	}
	if _, err := cli("get", "groups", "--server", "http://"+apiAddr); err == nil {
		t.Fatal("plain HTTP to the HTTPS API answered")
	}
	if _, err := cli("get", "groups", "--server", "http://"+apiAddr, "--insecure-skip-verify"); err == nil || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("--insecure-skip-verify with http://: %v", err)
	}
	// The CLI config file names the CA as caFile.
	cliConfig := filepath.Join(dir, "cli.yaml")
	writeFile(t, cliConfig, "server: https://"+apiAddr+"\ntoken: "+o.apiToken+"\ncaFile: "+certFile+"\n")
	var out bytes.Buffer
	root := NewRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"get", "groups", "--cli-config", cliConfig})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "homelab") {
		t.Fatalf("with caFile in the CLI config: %v\n%s", err, out.String())
	}
}

func TestServeAPITLSFlagsGoTogether(t *testing.T) {
	dir := t.TempDir()
	certFile, _, _ := selfSigned(t)
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), dataDir: t.TempDir(), logLevel: "warn", apiAddress: "127.0.0.1:0", apiToken: "tok-0123456789abcdef0123456789abcdef", apiTLSCert: certFile}
	if err := runServe(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--api-tls-key") {
		t.Fatalf("got %v, want an error naming --api-tls-key", err)
	}
	garbage := filepath.Join(dir, "garbage.key")
	writeFile(t, garbage, "not a key")
	o.apiTLSKey = garbage
	if err := runServe(context.Background(), o); err == nil || !strings.Contains(err.Error(), "REST API TLS") {
		t.Fatalf("got %v, want an error about the API's TLS", err)
	}
}
