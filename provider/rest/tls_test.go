package rest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/provider"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// selfSigned is a throwaway certificate for 127.0.0.1, made in process.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "claimstream-api"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), pool
}

// TestServeTLS: the API over TLS answers a client that trusts its
// certificate, refuses plaintext and untrusting clients, and logs each
// refused handshake at debug with the client's address and the reason.
func TestServeTLS(t *testing.T) {
	f := resttest.Scripted(t)
	certPEM, keyPEM, roots := selfSigned(t)
	logs := &logcapture.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tc, err := provider.ServerTLS(provider.TLSConfig{CertPEM: certPEM, KeyPEM: keyPEM, Logger: log, Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.ServeTLS(ctx, ln, f.Server.Config.Handler, tc, log, rest.ServerLimits{}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeTLS: %v", err)
		}
	})
	url := "https://" + ln.Addr().String()

	trusting := &rest.Client{BaseURL: url, Token: resttest.Token, HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}}
	if gs, err := trusting.Groups(context.Background()); err != nil || len(gs.Items) == 0 {
		t.Fatalf("over TLS: %v %v", gs, err)
	}

	plain := &rest.Client{BaseURL: "http://" + ln.Addr().String(), Token: resttest.Token}
	if _, err := plain.Groups(context.Background()); err == nil {
		t.Fatal("a plaintext request was served")
	}
	untrusting := &rest.Client{BaseURL: url, Token: resttest.Token, HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}}
	if _, err := untrusting.Groups(context.Background()); err == nil {
		t.Fatal("a client that does not trust the certificate was served")
	}
	eventstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if len(logs.Lines("level=DEBUG", "TLS handshake refused", "server=api", "remote=127.0.0.1:", "reason=")) < 2 {
			return fmt.Errorf("want two refused handshakes logged at debug:\n%s", logs)
		}
		return nil
	})
}

// TestServeTLSClosesUnauthenticatedConnections: over TLS, HTTP/2 as
// HTTP/1.1, a connection is not kept for a second request while it has
// not authenticated, and is once it has.
func TestServeTLSClosesUnauthenticatedConnections(t *testing.T) {
	f := resttest.Start(t)
	certPEM, keyPEM, roots := selfSigned(t)
	tc, err := provider.ServerTLS(provider.TLSConfig{CertPEM: certPEM, KeyPEM: keyPEM, Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.ServeTLS(ctx, ln, f.Server.Config.Handler, tc, nil, rest.ServerLimits{}) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, h2 := range []bool{true, false} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		client := &http.Client{Transport: tr}
		// get answers whether the request went on a connection kept from
		// an earlier one.
		get := func(path, token string) (reused bool) {
			t.Helper()
			trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "https://"+ln.Addr().String()+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || (resp.ProtoMajor == 2) != h2 {
				t.Fatalf("%s: %d over %s", path, resp.StatusCode, resp.Proto)
			}
			return reused
		}
		get("/healthz", "")
		// The client may see the GOAWAY or the close a moment late.
		for deadline := time.Now().Add(5 * time.Second); get("/healthz", ""); {
			if time.Now().After(deadline) {
				t.Fatalf("HTTP/2 %v: an unauthenticated connection was kept for the next request", h2)
			}
		}
		get("/api/v1/groups", resttest.Token)
		if !get("/api/v1/groups", resttest.Token) {
			t.Errorf("HTTP/2 %v: an authenticated connection was not kept", h2)
		}
		tr.CloseIdleConnections()
	}
}
