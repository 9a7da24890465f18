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
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

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
	deadline := time.Now().Add(5 * time.Second)
	for len(logs.Lines("level=DEBUG", "TLS handshake refused", "server=api", "remote=127.0.0.1:", "reason=")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("want two refused handshakes logged at debug:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
