package provider

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/credentials/insecure"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// TestCertRotationLogged: a rotation that fails (garbage in the file, a
// deleted file) keeps the previous pair in service and is logged once per
// change of the files, with the file and the error; a good rotation is
// logged as a reload and served.
func TestCertRotationLogged(t *testing.T) {
	p := newPKI(t, "rotate")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	stamp := time.Now().Add(-time.Hour)
	write := func(path string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		// Distinct modification times, whatever the file system's grain.
		stamp = stamp.Add(time.Minute)
		if err := os.Chtimes(path, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	write(certFile, p.serverCert)
	write(keyFile, p.serverKey)
	logs, log := logcapture.New(slog.LevelDebug)
	clk := testingclock.NewFakePassiveClock(time.Unix(1e9, 0))
	var failures []string
	tc, err := ServerTLS(TLSConfig{CertFile: certFile, KeyFile: keyFile, Logger: log, Clock: clk, Name: "api", OnReloadFailure: func(name string) { failures = append(failures, name) }})
	if err != nil {
		t.Fatal(err)
	}
	get := func() *tls.Certificate {
		t.Helper()
		clk.SetTime(clk.Now().Add(2 * time.Second))
		c, err := tc.GetCertificate(nil)
		if err != nil {
			t.Fatalf("GetCertificate: %v", err)
		}
		return c
	}
	first := get()

	write(certFile, []byte("garbage"))
	for range 3 {
		if c := get(); c != first {
			t.Fatal("a garbage certificate replaced the good one")
		}
	}
	if n := len(logs.Lines("level=WARN", "TLS certificate not reloaded", "server=api", "cert="+certFile, "failed to find any PEM data")); n != 1 {
		t.Fatalf("garbage: %d warnings, want 1:\n%s", n, logs)
	}

	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if c := get(); c != first {
			t.Fatal("a deleted certificate replaced the good one")
		}
	}
	if n := len(logs.Lines("level=WARN", "TLS certificate not reloaded", "no such file")); n != 1 {
		t.Fatalf("deleted: %d warnings, want 1:\n%s", n, logs)
	}

	cert2, key2 := p.issue(t, "claimstream-provider", 0, 9)
	write(certFile, cert2)
	write(keyFile, key2)
	if c := get(); c == first {
		t.Fatal("the good rotation was not served")
	}
	if n := len(logs.Lines("level=INFO", "TLS certificate reloaded", "server=api", "cert="+certFile)); n != 1 {
		t.Fatalf("reload: %d info lines, want 1:\n%s", n, logs)
	}
	if len(failures) != 2 || failures[0] != "api" {
		t.Fatalf("OnReloadFailure calls %v, want two for api (garbage, deleted)", failures)
	}
}

// TestRefusedHandshakeLogged: the provider logs a refused TLS handshake
// at debug with the client's address and the reason.
func TestRefusedHandshakeLogged(t *testing.T) {
	p := newPKI(t, "hs")
	logs, log := logcapture.New(slog.LevelDebug)
	creds, err := ServerCredentials(TLSConfig{CertPEM: p.serverCert, KeyPEM: p.serverKey, ClientCAPEM: p.caPEM, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveTLS(t, creds)
	if err := call(t, addr, insecure.NewCredentials()); err == nil {
		t.Fatal("a plaintext client was served")
	}
	if err := call(t, addr, clientTLS(t, p.caPEM, nil, nil)); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	eventstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if len(logs.Lines("level=DEBUG", "TLS handshake refused", "server=provider", "remote=127.0.0.1:")) < 2 {
			return fmt.Errorf("want two refused handshakes logged at debug:\n%s", logs)
		}
		return nil
	})
	if len(logs.Lines("reason=")) < 2 {
		t.Fatalf("no reasons:\n%s", logs)
	}
}
